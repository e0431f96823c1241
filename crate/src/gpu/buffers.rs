//! Buffers: creation within the device's limits, sub-range views, and the
//! one read-back path (async everywhere; native polls, the browser awaits).

use bytemuck::Pod;
use wgpu::util::DeviceExt;

use super::Gpu;
use crate::error::{Error, Result};

const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// A byte range of a buffer, as kernels bind it.
#[derive(Clone, Copy, Debug)]
pub struct BufferRange<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: u64,
    pub size: u64,
}

impl<'a> From<&'a wgpu::Buffer> for BufferRange<'a> {
    fn from(buffer: &'a wgpu::Buffer) -> Self {
        BufferRange {
            buffer,
            offset: 0,
            size: buffer.size(),
        }
    }
}

impl<'a> BufferRange<'a> {
    pub fn binding(&self) -> wgpu::BindingResource<'a> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: self.buffer,
            offset: self.offset,
            size: wgpu::BufferSize::new(self.size),
        })
    }

    /// This range bound to a slot that reads or writes `bytes` of it.
    pub fn needs(self, bytes: u64) -> Bind<'a> {
        Bind {
            range: self,
            needed: bytes,
        }
    }
}

/// What a dispatch binds to one slot: a range and the bytes the kernel
/// needs of it, which `Kernel::dispatch` checks against the slot (a
/// uniform is bound unchecked).
#[derive(Clone, Copy, Debug)]
pub struct Bind<'a> {
    pub range: BufferRange<'a>,
    pub needed: u64,
}

/// A whole buffer, all of it needed: a params uniform, or a buffer the
/// launcher made itself.
impl<'a> From<&'a wgpu::Buffer> for Bind<'a> {
    fn from(buffer: &'a wgpu::Buffer) -> Self {
        BufferRange::from(buffer).needs(buffer.size())
    }
}

/// Bytes of an f16 tensor of `n` elements: whole 32-bit words.
pub fn f16_bytes(n: u64) -> u64 {
    n.div_ceil(2) * 4
}

impl Gpu {
    /// A zeroed storage buffer.
    pub fn storage_buffer(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer> {
        self.check_buffer_size(label, bytes)?;
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.next_multiple_of(4).max(4),
            usage: STORAGE,
            mapped_at_creation: false,
        }))
    }

    /// A storage buffer holding `data`, padded with zeros to whole words.
    pub fn upload<T: Pod>(&self, label: &str, data: &[T]) -> Result<wgpu::Buffer> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        self.check_buffer_size(label, bytes.len() as u64)?;
        let padded;
        let contents = if bytes.len().is_multiple_of(4) && !bytes.is_empty() {
            bytes
        } else {
            padded = [bytes, &[0u8; 4][..4 - bytes.len() % 4]].concat();
            &padded[..]
        };
        Ok(self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: STORAGE,
            }))
    }

    /// A uniform buffer holding one params struct.
    pub fn uniform<T: Pod>(&self, label: &str, params: &T) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::bytes_of(params),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            })
    }

    fn check_buffer_size(&self, label: &str, bytes: u64) -> Result<()> {
        let limit = self.limits.max_buffer_size;
        if bytes > limit {
            return Err(Error::Limit {
                op: "buffer",
                what: format!("buffer {label:?}"),
                needed: bytes,
                limit,
            });
        }
        Ok(())
    }

    /// Checks that `range` can be bound as `what` of `op` and holds `needed`
    /// bytes: what `Kernel::dispatch` asks of each storage binding.
    pub(super) fn check_binding(
        &self,
        op: &'static str,
        what: &'static str,
        range: &BufferRange,
        needed: u64,
    ) -> Result<()> {
        if range.size < needed {
            return Err(Error::shape(
                op,
                what,
                format!("at least {needed} bytes"),
                format!("{} bytes", range.size),
            ));
        }
        let limit = self.limits.max_storage_buffer_binding_size;
        if range.size > limit {
            return Err(Error::Limit {
                op,
                what: format!("binding {what}"),
                needed: range.size,
                limit,
            });
        }
        let align = self.limits.min_storage_buffer_offset_alignment as u64;
        if !range.offset.is_multiple_of(align) {
            return Err(Error::shape(
                op,
                what,
                format!("offset a multiple of {align}"),
                range.offset,
            ));
        }
        Ok(())
    }

    /// Copies `range` to the host. `range.size` must be a multiple of 4.
    pub async fn read_back<T: Pod>(&self, range: BufferRange<'_>) -> Result<Vec<T>> {
        let size = range.size;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("read_back"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("read_back"),
            });
        encoder.copy_buffer_to_buffer(range.buffer, range.offset, &staging, 0, size);
        self.queue.submit([encoder.finish()]);

        let (tx, rx) = futures_channel::oneshot::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu {
                op: "read_back".into(),
                message: e.to_string(),
            })?;
        let mapped = rx.await.map_err(|_| Error::Gpu {
            op: "read_back".into(),
            message: "map callback dropped".into(),
        })?;
        self.check_health()?;
        mapped.map_err(|e| Error::Gpu {
            op: "read_back".into(),
            message: e.to_string(),
        })?;
        let view = staging.get_mapped_range(..).map_err(|e| Error::Gpu {
            op: "read_back".into(),
            message: e.to_string(),
        })?;
        let out = bytemuck::pod_collect_to_vec(&view);
        drop(view);
        staging.unmap();
        Ok(out)
    }
}
