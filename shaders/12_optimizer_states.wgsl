// The optimizer's low-precision states, composed after 12_optimizer.wgsl
// (its bindings, AdamBlock and AdamStep, adam_moments, adam_weight,
// master_value): AdamW's update with block-wise codes (int8, fp8,
// int8-linear, int4) and with bf16 moments, and Muon's momentum step in
// every state.

// adamw_8bit_update, adamw_8bit_update_f16: the update above with m and v
// stored as 8-bit codes, 4 per word (element 4k+j in byte j of word k), and
// one f32 scale per block of QBLOCK values and moment: the block's absmax
// after the update. Codes are dynamic trees (reference::optimizer; v's is on
// sqrt(v/absmax)). The moments are dequantized, updated in f32 and used
// unquantized for this step's weights, then rounded stochastically against
// the block's new absmax (a workgroup max in a fixed order), with a dither
// hashed from (element, step, moment): unbiased, so a moment drifting by
// less than half a code step per update still moves. One invocation per
// word, so every write is a whole word; QWORDS invocations per block,
// WG/QWORDS blocks per workgroup. A skipped step only zeroes the gradients.
//
// adamw_fp8_update(_f16): the same words with TorchAO's FP8 state
// (pytorch/ao@36027d8, torchao/optim/subclass_fp8.py): each block's scale
// s = max(absmax, 1e-12)/448, each value's byte the E4M3 code of x/s to
// nearest even, its value back code·s (every quotient and product
// correctly rounded, so the twin, ops::adam::Fp8Code, is met bit for bit).
//
// adamw_linear_update(_f16): m on 8-bit Muon's linear code (Gupta et al.,
// arXiv 2509.23106; twin ops::adam::LinearCode): the block's absmax is its
// scale, a value's byte round(127 · (x/absmax)) to nearest even as a
// signed byte, its value code · (absmax/127); v as adamw_8bit_update's.
const QBLOCK: u32 = 256u;
const QWORDS: u32 = QBLOCK / 4u;  // packed words per block
const E4M3_STATE_MAX: f32 = 448.0;  // E4M3's largest value: a block's absmax maps to it
const LINEAR_LEVELS: f32 = 127.0;   // the linear code's largest magnitude

// What a block-wise state's bytes stand for (ops::adam::ByteCode).
const CODE_DYNAMIC: u32 = 0u;  // the tables, rounded stochastically
const CODE_E4M3: u32 = 1u;     // TorchAO's FP8 state
const CODE_LINEAR: u32 = 2u;   // m linear, v on the dynamic table

@group(0) @binding(5) var<storage, read_write> m_codes: array<u32>;    // [⌈n/4⌉] 4 bytes of m per word
@group(0) @binding(6) var<storage, read_write> v_codes: array<u32>;    // [⌈n/4⌉] 4 bytes of v per word
@group(0) @binding(7) var<storage, read_write> m_scales: array<f32>;   // [⌈n/QBLOCK⌉] max |m| per block
@group(0) @binding(8) var<storage, read_write> v_scales: array<f32>;   // [⌈n/QBLOCK⌉] max v per block
@group(0) @binding(9) var<storage, read_write> q_mirror: array<half2>; // [n] f16, adamw_8bit_update_f16
// The codes' tables, from Int8Map in ops/adam.rs: values of m at
// [0, 256), of v at [256, 512), then each value's step to the next (cut to
// 16 bits) at [512, 1024). Computed on the host, so no arithmetic here can
// differ from the CPU twin's. A buffer, not a WGSL const: a const array
// indexed by a variable is copied into every invocation (9× slower on
// lavapipe).
@group(0) @binding(10) var<storage, read> code_tables: array<f32, 1024>;

var<workgroup> q_table: array<f32, 1024>;
var<workgroup> q_max: array<vec2<f32>, WG>;

// The rows of the tables (bit j: entries [256j, 256j + 256)) that `code`
// reads for the moments in `moments` (bit 0: m, bit 1: v): each one's
// values and steps; none for E4M3 or the linear code's m.
fn code_rows(code: u32, moments: u32) -> u32 {
    if (code == CODE_E4M3) { return 0u; }
    let used = select(moments, moments & 2u, code == CODE_LINEAR);
    return used | (used << 2u);
}

// The first `count` entries of each row in `rows` (code_rows'; int4's
// maps are 16 entries of rows 0 and 1), one per invocation (WG = 256): a
// workgroup loads only what it reads.
fn load_codes(lidx: u32, rows: u32, count: u32) {
    for (var j = 0u; j < 4u; j++) {
        if ((rows & (1u << j)) != 0u && lidx < count) { q_table[256u * j + lidx] = code_tables[256u * j + lidx]; }
    }
    workgroupBarrier();
}

// lowbias32 (C. Wellons): the u32 arithmetic of reference::optimizer::dither.
fn mix32(x0: u32) -> u32 {
    var x = x0;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    return x ^ (x >> 16u);
}

// In 0..256, as reference::optimizer::dither.
fn dither(i: u32, moment: u32) -> u32 {
    return mix32(i ^ mix32(2u * adam_step.t + moment)) >> 24u;
}

// The byte of x in a block of scale s (base 0: m, 256: v) for dither r: a
// binary search for the value at or below x, then a step up when x passes
// the dithered threshold. r/256 · step is exact (8 × 16 bits), so an fma
// gives the same threshold.
fn quantize(x: f32, s: f32, base: u32, r: u32) -> u32 {
    var k = 0u;
    for (var step = 128u; step > 0u; step >>= 1u) {
        if (x >= q_table[base + k + step] * s) { k += step; }
    }
    let threshold = q_table[base + k] + (f32(r) * (1.0 / 256.0)) * q_table[512u + base + k];
    return k + select(0u, 1u, k < 255u && x > threshold * s);
}

// E4M3's value of byte c (OFP8: S.EEEE.MMM, bias 7; c below 0x7f).
fn e4m3_value(c: u32) -> f32 {
    let e = i32((c >> 3u) & 15u);
    let m = f32(c & 7u);
    let magnitude = select(ldexp(8.0 + m, e - 10), ldexp(m, -9), e == 0);
    return select(magnitude, -magnitude, (c & 0x80u) != 0u);
}

// The byte of y in E4M3, to nearest even (|y| within 448 by the scale).
fn e4m3_code(y: f32) -> u32 {
    let bits = bitcast<u32>(round_format(y, FMT_E4M3));
    let sign = select(0u, 0x80u, (bits & SIGN_BIT) != 0u);
    if ((bits & 0x7fffffffu) == 0u) { return sign; }
    let s = split(bitcast<f32>(bits & 0x7fffffffu));
    // subnormal: m·2^-9, m = sig·2^(e − 14)
    if (s.e < -6) { return sign | (s.sig >> u32(14 - s.e)); }
    return sign | (u32(s.e + 7) << 3u) | ((s.sig >> 20u) & 7u);
}

// The linear code's byte of x in a block of absmax s (div_round(0, 0) is 0).
fn linear_code(x: f32, s: f32) -> u32 {
    let q = clamp(round(mul_rne(LINEAR_LEVELS, div_round(x, s))), -LINEAR_LEVELS, LINEAR_LEVELS);
    return bitcast<u32>(i32(q)) & 0xffu;
}

// What a byte's level is multiplied by in a block of stored scale s (base
// 0: m, 256: v): s, or the linear code's absmax/127. Once per word.
fn state_unit(s: f32, base: u32, code: u32) -> f32 {
    if (code == CODE_LINEAR && base == 0u) { return div_round(s, LINEAR_LEVELS); }
    return s;
}

// The value of state byte c in a block of unit u (state_unit's).
fn state_value(c: u32, u: f32, base: u32, code: u32) -> f32 {
    if (code == CODE_E4M3) { return mul_rne(e4m3_value(c), u); }
    if (code == CODE_LINEAR && base == 0u) { return mul_rne(f32(bitcast<i32>(c << 24u) >> 24u), u); }
    return q_table[base + c] * u;
}

// A block's stored scale from its largest new magnitude.
fn state_scale(top: f32, code: u32) -> f32 {
    if (code == CODE_E4M3) { return div_round(max(top, 1e-12f), E4M3_STATE_MAX); }
    return top;
}

// The byte of x in a block of stored scale s, for dither r (the tables only).
fn state_code(x: f32, s: f32, base: u32, r: u32, code: u32) -> u32 {
    if (code == CODE_E4M3) { return e4m3_code(div_round(x, s)); }
    if (code == CODE_LINEAR && base == 0u) { return linear_code(x, s); }
    return quantize(x, s, base, r);
}

// Max of x over the `lanes` invocations (a power of two) of this
// invocation's block.
fn block_max(x: vec2<f32>, lidx: u32, lanes: u32) -> vec2<f32> {
    q_max[lidx] = x;
    workgroupBarrier();
    let lane = lidx % lanes;
    for (var s = lanes / 2u; s > 0u; s >>= 1u) {
        if (lane < s) { q_max[lidx] = max(q_max[lidx], q_max[lidx + s]); }
        workgroupBarrier();
    }
    return q_max[lidx - lane];
}

// Updates word k (elements 4k .. 4k+3); returns their new master weights,
// 0 past n. Call from uniform control flow: it holds barriers.
fn adamw_8bit_word(k: u32, lidx: u32, code: u32) -> vec4<f32> {
    load_codes(lidx, code_rows(code, 3u), 256u);
    let live = k >= adam.first / 4u && k < (adam.n + 3u) / 4u;
    let skip = stats.skip != 0u;
    let block = k / QWORDS;
    var w = vec4<f32>(0.0);
    var m = vec4<f32>(0.0);
    var v = vec4<f32>(0.0);
    if (live) {
        let mc = m_codes[k];
        let vc = v_codes[k];
        let ms = state_unit(m_scales[block], 0u, code);
        let vs = state_unit(v_scales[block], 256u, code);
        // every read before any write, as in adamw_update
        var raw = vec4<f32>(0.0);
        var w_old = vec4<f32>(0.0);
        for (var j = 0u; j < 4u; j++) {
            let i = 4u * k + j;
            if (i < adam.n) {
                raw[j] = grads[i];
                w_old[j] = load_weight(i);
            }
        }
        for (var j = 0u; j < 4u; j++) {
            let i = 4u * k + j;
            if (i < adam.n) {
                grads[i] = 0.0;
                if (!skip) {
                    let m_old = state_value((mc >> (8u * j)) & 0xffu, ms, 0u, code);
                    let v_old = state_value((vc >> (8u * j)) & 0xffu, vs, 256u, code);
                    let mv = adam_moments(raw[j], m_old, v_old);
                    w[j] = master_value(adam_weight(w_old[j], mv), i);
                    store_weight(i, w_old[j], w[j]);
                    m[j] = mv.x;
                    v[j] = mv.y;
                }
            }
        }
    }
    let a = abs(m);
    let top = block_max(vec2<f32>(max(max(a.x, a.y), max(a.z, a.w)), max(max(v.x, v.y), max(v.z, v.w))), lidx, QWORDS);
    // the block's old scales were read above by every invocation of the
    // block; order those reads before the new scales' write
    storageBarrier();
    if (live && !skip) {
        let s = vec2<f32>(state_scale(top.x, code), state_scale(top.y, code));
        var mq = 0u;
        var vq = 0u;
        for (var j = 0u; j < 4u; j++) {
            let i = 4u * k + j;
            mq |= state_code(m[j], s.x, 0u, dither(i, 0u), code) << (8u * j);
            vq |= state_code(v[j], s.y, 256u, dither(i, 1u), code) << (8u * j);
        }
        m_codes[k] = mq;
        v_codes[k] = vq;
        if (k % QWORDS == 0u) {
            m_scales[block] = s.x;
            v_scales[block] = s.y;
        }
    }
    return w;
}

// The mirror's two words of word k's four values, written whole.
fn mirror_word(k: u32, w: vec4<f32>) {
    if (k >= adam.first / 4u && k < (adam.n + 3u) / 4u && stats.skip == 0u) {
        q_mirror[2u * k] = pack_half2(w.xy);
        if (4u * k + 2u < adam.n) { q_mirror[2u * k + 1u] = pack_half2(w.zw); }
    }
}

@compute @workgroup_size(WG)
fn adamw_8bit_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidx: u32) {
    adamw_8bit_word(flat_id(wid, nwg, lidx), lidx, CODE_DYNAMIC);
}

@compute @workgroup_size(WG)
fn adamw_8bit_update_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lidx: u32) {
    let k = flat_id(wid, nwg, lidx);
    mirror_word(k, adamw_8bit_word(k, lidx, CODE_DYNAMIC));
}

@compute @workgroup_size(WG)
fn adamw_fp8_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    adamw_8bit_word(flat_id(wid, nwg, lidx), lidx, CODE_E4M3);
}

@compute @workgroup_size(WG)
fn adamw_fp8_update_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lidx: u32) {
    let k = flat_id(wid, nwg, lidx);
    mirror_word(k, adamw_8bit_word(k, lidx, CODE_E4M3));
}

@compute @workgroup_size(WG)
fn adamw_linear_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lidx: u32) {
    adamw_8bit_word(flat_id(wid, nwg, lidx), lidx, CODE_LINEAR);
}

@compute @workgroup_size(WG)
fn adamw_linear_update_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_index) lidx: u32) {
    let k = flat_id(wid, nwg, lidx);
    mirror_word(k, adamw_8bit_word(k, lidx, CODE_LINEAR));
}

// adamw_int4_update(_f16): TorchAO's 4-bit state (pytorch/ao,
// torchao/optim/subclass_4bit.py, quant_utils.py; twin ops::adam::Int4Code):
// 8 codes per word, element 8k+j in byte j/2 of word k, the high nibble
// for even j (TorchAO's packing, so the buffer's bytes are its codes);
// blocks of QBLOCK4 values (QWORDS4 words); a block's scale
// max(absmax, 1e-12); a value's code the nearest of its map's 16 points to
// x/scale (quantize_4bit_with_qmap's search and midpoint test); its value
// map[c]·scale. The maps come in the code tables' places (m at 0, v at
// 256). Deterministic, every quotient and product correctly rounded.
const QBLOCK4: u32 = 128u;
const QWORDS4: u32 = QBLOCK4 / 8u;

fn nibble_shift(j: u32) -> u32 {
    return 8u * (j / 2u) + select(0u, 4u, j % 2u == 0u);
}

// The value of element j of a word of codes, in a block of scale s.
fn int4_value(word: u32, j: u32, s: f32, base: u32) -> f32 {
    return mul_rne(q_table[base + ((word >> nibble_shift(j)) & 15u)], s);
}

// The code of x in a block of scale s.
fn int4_code(x: f32, s: f32, base: u32) -> u32 {
    let y = div_round(x, s);
    var c = 0u;
    for (var step = 8u; step > 0u; step >>= 1u) {
        if (y >= q_table[base + c + step]) { c += step; }
    }
    let up = min(c + 1u, 15u);
    let down = q_table[base + c];
    return select(c, up, y - down >= (q_table[base + up] - down) * 0.5);
}

fn int4_live(k: u32) -> bool {
    return k >= adam.first / 8u && k < (adam.n + 7u) / 8u;
}

// Updates word k (elements 8k .. 8k+7) as adamw_8bit_word; returns their
// new master weights, 0 past n. Call from uniform control flow.
fn adamw_int4_word(k: u32, lidx: u32) -> array<f32, 8> {
    load_codes(lidx, 3u, 16u);
    let live = int4_live(k);
    let skip = stats.skip != 0u;
    let block = k / QWORDS4;
    var w: array<f32, 8>;
    var m: array<f32, 8>;
    var v: array<f32, 8>;
    if (live) {
        let mc = m_codes[k];
        let vc = v_codes[k];
        let ms = m_scales[block];
        let vs = v_scales[block];
        var raw: array<f32, 8>;
        var w_old: array<f32, 8>;
        for (var j = 0u; j < 8u; j++) {
            let i = 8u * k + j;
            if (i < adam.n) {
                raw[j] = grads[i];
                w_old[j] = load_weight(i);
            }
        }
        for (var j = 0u; j < 8u; j++) {
            let i = 8u * k + j;
            if (i < adam.n) {
                grads[i] = 0.0;
                if (!skip) {
                    let mv = adam_moments(raw[j], int4_value(mc, j, ms, 0u), int4_value(vc, j, vs, 256u));
                    w[j] = master_value(adam_weight(w_old[j], mv), i);
                    store_weight(i, w_old[j], w[j]);
                    m[j] = mv.x;
                    v[j] = mv.y;
                }
            }
        }
    }
    var top = vec2<f32>(0.0);
    for (var j = 0u; j < 8u; j++) { top = max(top, vec2<f32>(abs(m[j]), v[j])); }
    top = block_max(top, lidx, QWORDS4);
    storageBarrier();  // the block's old scales were read above
    if (live && !skip) {
        let s = max(top, vec2<f32>(1e-12f));
        var mq = 0u;
        var vq = 0u;
        for (var j = 0u; j < 8u; j++) {
            mq |= int4_code(m[j], s.x, 0u) << nibble_shift(j);
            vq |= int4_code(v[j], s.y, 256u) << nibble_shift(j);
        }
        m_codes[k] = mq;
        v_codes[k] = vq;
        if (k % QWORDS4 == 0u) {
            m_scales[block] = s.x;
            v_scales[block] = s.y;
        }
    }
    return w;
}

@compute @workgroup_size(WG)
fn adamw_int4_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidx: u32) {
    adamw_int4_word(flat_id(wid, nwg, lidx), lidx);
}

// The mirror's four words of word k's eight values, each written whole.
@compute @workgroup_size(WG)
fn adamw_int4_update_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lidx: u32) {
    let k = flat_id(wid, nwg, lidx);
    let w = adamw_int4_word(k, lidx);
    if (int4_live(k) && stats.skip == 0u) {
        for (var p = 0u; p < 4u; p++) {
            if (8u * k + 2u * p < adam.n) { q_mirror[4u * k + p] = pack_half2(vec2<f32>(w[2u * p], w[2u * p + 1u])); }
        }
    }
}

// adamw_bf16_update(_f16): m and v as bf16 (DeepSeek-V3's moments), two
// per word (element 2k+j in half j of word k, bound at the chunk's own
// start), updated in f32 and used so for this step's weights, then
// rounded to nearest even (bf16_at reads them). One invocation per word.
// word with half j replaced by x rounded to bf16, to nearest even
fn with_bf16_half(word: u32, j: u32, x: f32) -> u32 {
    let h = bitcast<u32>(round_format(x, FMT_BF16)) >> 16u;
    return (word & ~(0xffffu << (16u * j))) | (h << (16u * j));
}

// Updates word k (elements 2k, 2k+1 < n); returns their master weights.
fn adamw_bf16_word(k: u32) -> vec2<f32> {
    let i = 2u * k;
    let count = min(2u, adam.n - i);
    let mw = m_codes[k];
    let vw = v_codes[k];
    var raw = vec2<f32>(0.0);
    var w = vec2<f32>(0.0);
    for (var j = 0u; j < count; j++) {
        raw[j] = grads[i + j];
        w[j] = load_weight(i + j);
    }
    var mq = mw;
    var vq = vw;
    for (var j = 0u; j < count; j++) {
        grads[i + j] = 0.0;
        if (stats.skip == 0u) {
            let mv = adam_moments(raw[j], bf16_at(mw, j), bf16_at(vw, j));
            let w_old = w[j];
            w[j] = master_value(adam_weight(w_old, mv), i + j);
            store_weight(i + j, w_old, w[j]);
            mq = with_bf16_half(mq, j, mv.x);
            vq = with_bf16_half(vq, j, mv.y);
        }
    }
    if (stats.skip == 0u) {
        m_codes[k] = mq;
        v_codes[k] = vq;
    }
    return w;
}

@compute @workgroup_size(WG)
fn adamw_bf16_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidx: u32) {
    let k = flat_id(wid, nwg, lidx);
    if (2u * k < adam.n) { adamw_bf16_word(k); }
}

@compute @workgroup_size(WG)
fn adamw_bf16_update_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lidx: u32) {
    let k = flat_id(wid, nwg, lidx);
    if (2u * k >= adam.n) { return; }
    let w = adamw_bf16_word(k);
    if (stats.skip == 0u) { mirror[k] = pack_half2(w); }
}

// muon_momentum, muon_momentum_8bit: μ is the block's beta1; the state is
// moment1 (f32) or m's codes and scales (8-bit, quantized as AdamW's m,
// from element `first` on); element i's Nesterov direction goes to
// nesterov[i − first].
@group(0) @binding(11) var<storage, read_write> nesterov: array<f32>;

// (new m, Nesterov direction) of one element from its raw gradient.
fn muon_moments(raw: f32, m_old: f32) -> vec2<f32> {
    let g = select(0.0, raw * stats.clip_scale, is_finite(raw));
    let m = m_old + (1.0 - adam.beta1) * (g - m_old);
    return vec2<f32>(m, g + adam.beta1 * (m - g));
}

@compute @workgroup_size(WG)
fn muon_momentum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= adam.n) { return; }
    let raw = grads[i];
    let m_old = moment1[i];
    grads[i] = 0.0;
    if (stats.skip != 0u) { return; }
    let mu = muon_moments(raw, m_old);
    moment1[i] = mu.x;
    nesterov[i] = mu.y;
}

// One invocation per word of 4 codes, as adamw_8bit_word. Call from
// uniform control flow: it holds barriers.
fn muon_momentum_word(k: u32, lidx: u32, code: u32) {
    load_codes(lidx, code_rows(code, 1u), 256u);
    let live = k >= adam.first / 4u && k < (adam.n + 3u) / 4u;
    let skip = stats.skip != 0u;
    let block = k / QWORDS;
    var m = vec4<f32>(0.0);
    if (live) {
        let mc = m_codes[k];
        let ms = state_unit(m_scales[block], 0u, code);
        var raw = vec4<f32>(0.0);
        for (var j = 0u; j < 4u; j++) {
            if (4u * k + j < adam.n) { raw[j] = grads[4u * k + j]; }
        }
        for (var j = 0u; j < 4u; j++) {
            let i = 4u * k + j;
            if (i < adam.n) {
                grads[i] = 0.0;
                if (!skip) {
                    let mu = muon_moments(raw[j], state_value((mc >> (8u * j)) & 0xffu, ms, 0u, code));
                    m[j] = mu.x;
                    nesterov[i - adam.first] = mu.y;
                }
            }
        }
    }
    let a = abs(m);
    let top = block_max(vec2<f32>(max(max(a.x, a.y), max(a.z, a.w)), 0.0), lidx, QWORDS);
    storageBarrier();  // the block's old scale was read above
    if (live && !skip) {
        let s = state_scale(top.x, code);
        var mq = 0u;
        for (var j = 0u; j < 4u; j++) {
            mq |= state_code(m[j], s, 0u, dither(4u * k + j, 0u), code) << (8u * j);
        }
        m_codes[k] = mq;
        if (k % QWORDS == 0u) { m_scales[block] = s; }
    }
}

@compute @workgroup_size(WG)
fn muon_momentum_8bit(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lidx: u32) {
    muon_momentum_word(flat_id(wid, nwg, lidx), lidx, CODE_DYNAMIC);
}

@compute @workgroup_size(WG)
fn muon_momentum_fp8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidx: u32) {
    muon_momentum_word(flat_id(wid, nwg, lidx), lidx, CODE_E4M3);
}

// 8-bit Muon's linear momentum (arXiv 2509.23106), blocks of QBLOCK.
@compute @workgroup_size(WG)
fn muon_momentum_linear(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lidx: u32) {
    muon_momentum_word(flat_id(wid, nwg, lidx), lidx, CODE_LINEAR);
}

// int4 momentum, eight values per word as adamw_int4_word (m's map).
@compute @workgroup_size(WG)
fn muon_momentum_int4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lidx: u32) {
    let k = flat_id(wid, nwg, lidx);
    load_codes(lidx, 1u, 16u);
    let live = int4_live(k);
    let skip = stats.skip != 0u;
    let block = k / QWORDS4;
    var m: array<f32, 8>;
    if (live) {
        let mc = m_codes[k];
        let ms = m_scales[block];
        var raw: array<f32, 8>;
        for (var j = 0u; j < 8u; j++) {
            if (8u * k + j < adam.n) { raw[j] = grads[8u * k + j]; }
        }
        for (var j = 0u; j < 8u; j++) {
            let i = 8u * k + j;
            if (i < adam.n) {
                grads[i] = 0.0;
                if (!skip) {
                    let mu = muon_moments(raw[j], int4_value(mc, j, ms, 0u));
                    m[j] = mu.x;
                    nesterov[i - adam.first] = mu.y;
                }
            }
        }
    }
    var top = 0.0;
    for (var j = 0u; j < 8u; j++) { top = max(top, abs(m[j])); }
    let s = max(block_max(vec2<f32>(top, 0.0), lidx, QWORDS4).x, 1e-12f);
    storageBarrier();  // the block's old scale was read above
    if (live && !skip) {
        var mq = 0u;
        for (var j = 0u; j < 8u; j++) { mq |= int4_code(m[j], s, 0u) << nibble_shift(j); }
        m_codes[k] = mq;
        if (k % QWORDS4 == 0u) { m_scales[block] = s; }
    }
}

// bf16 momentum, two values per word as adamw_bf16_word (first is 0).
@compute @workgroup_size(WG)
fn muon_momentum_bf16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lidx: u32) {
    let k = flat_id(wid, nwg, lidx);
    let i = 2u * k;
    if (i >= adam.n) { return; }
    let count = min(2u, adam.n - i);
    let mw = m_codes[k];
    var raw = vec2<f32>(0.0);
    for (var j = 0u; j < count; j++) { raw[j] = grads[i + j]; }
    var mq = mw;
    for (var j = 0u; j < count; j++) {
        grads[i + j] = 0.0;
        if (stats.skip == 0u) {
            let mu = muon_moments(raw[j], bf16_at(mw, j));
            mq = with_bf16_half(mq, j, mu.x);
            nesterov[i + j] = mu.y;
        }
    }
    if (stats.skip == 0u) { m_codes[k] = mq; }
}
