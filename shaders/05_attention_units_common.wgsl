// The parts the three attention kernels on matrix units share (composed
// ahead of 05_attention_units.wgsl, 05_attention_units_dq.wgsl and
// 05_attention_units_dkv.wgsl, after 05_attention_common.wgsl): which block
// a workgroup takes, the staging of operand rows as f16, and the write of
// the block's rows. They touch only the workgroup arrays all three declare
// (sq, sk, sv); what differs per kernel comes through its own `put_q`,
// `q_partner` and `write_chunk`.

// A workgroup's block: BR rows from `first` of head `head` (a kv head in
// the key-major pass) of sequence `batch`. The spare workgroups of a 2-D
// grid redo the last block and write nothing (`live` false): no early
// return (naga's uniformity analysis would then refuse the fragment
// operations).
struct UnitBlock {
    live: bool,
    first: u32,
    head: u32,
    batch: u32,
}

// The block of workgroup `wid` among blocks of BR rows of `heads` heads.
fn unit_block(wid: vec3<u32>, nwg: vec3<u32>, heads: u32) -> UnitBlock {
    let blocks = (params.seq_len + BR - 1u) / BR;
    let groups = blocks * heads * params.batch;
    let g = min(flat_group(wid, nwg), groups - 1u);
    let first = (g % blocks) * BR;
    return UnitBlock(flat_group(wid, nwg) < groups, first, (g / blocks) % heads, g / (blocks * heads));
}

// `rows` rows from `first` of sequence `b` into workgroup memory as f16,
// zeros past the sequence: k and v of kv head `head` into sk and sv (`kv`),
// or q of head `head` and its partner (the kernel's `q_partner`) through
// the kernel's `put_q`.
fn stage(li: u32, rows: u32, first: u32, b: u32, head: u32, kv: bool) {
    let t_len = params.seq_len;
    for (var e = li; e < rows * DH4; e += UWG) {
        let r = e / DH4;
        let c = e % DH4;
        var x = vec4<f32>(0.0);
        var y = vec4<f32>(0.0);
        if (first + r < t_len) {
            let row = b * t_len + first + r;
            if (kv) {
                x = attn_operand4(k[k_at(row, head) + c]);
                y = attn_operand4(v[v_at(row, head) + c]);
            } else {
                x = attn_operand4(q[q_at(row, head) + c]);
                y = q_partner(row, head, c);
            }
        }
        let at = r * DHP + 4u * c;
        if (kv) {
            for (var i = 0u; i < 4u; i++) {
                sk[at + i] = f16(x[i]);
                sv[at + i] = f16(y[i]);
            }
        } else {
            put_q(at, x, y);
        }
    }
}

// Each of the block's rows the sequence holds, in chunks of four, to the
// kernel's `write_chunk(r, c, row, head)`: none from a spare workgroup.
fn write_rows(li: u32, block: UnitBlock) {
    for (var e = li; e < BR * DH4; e += UWG) {
        let r = e / DH4;
        if (block.live && block.first + r < params.seq_len) {
            write_chunk(r, e % DH4, block.batch * params.seq_len + block.first + r, block.head);
        }
    }
}
