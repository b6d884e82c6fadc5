//! NVMe commands through a namespace's generic node (`/dev/ngXnY`) and
//! io_uring's `URING_CMD`, as fio's `io_uring_cmd` engine sends them: the
//! NVMe Read and Write commands themselves, several in flight, with no
//! block layer between.
//!
//! An NVMe command is 64 bytes, too large for an ordinary submission
//! entry: the ring is set up with 128-byte entries and 32-byte
//! completions (IORING_SETUP_SQE128 and CQE32, which the io-uring crate's
//! `Entry128`/`Entry32` select). The namespace's size and block format
//! come from Identify Namespace (an admin command the generic node
//! passes on); a namespace whose blocks carry metadata is refused, since
//! its data could not be copied alone.
//!
//! A completion's result is negative for a system error, positive for an
//! NVMe status (status code type and code), which [`status_text`] puts in
//! the specification's words.

use std::os::fd::{AsRawFd, OwnedFd};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::buffer::AlignedBuf;
use super::passthrough::{self, CommandError, CommandQueue, Geometry, Interface, Op};
use super::Errno;

/// `NVME_IOCTL_ID`: the namespace id of the node.
const NVME_IOCTL_ID: libc::c_ulong = 0x4e40;
/// `NVME_IOCTL_ADMIN_CMD`: `_IOWR('N', 0x41, struct nvme_passthru_cmd)`.
const NVME_IOCTL_ADMIN_CMD: libc::c_ulong = 0xc048_4e41;
/// `NVME_IOCTL_IO_CMD`: `_IOWR('N', 0x43, struct nvme_passthru_cmd)`.
const NVME_IOCTL_IO_CMD: libc::c_ulong = 0xc048_4e43;
/// `NVME_URING_CMD_IO`: `_IOWR('N', 0x80, struct nvme_uring_cmd)`.
const NVME_URING_CMD_IO: u32 = 0xc048_4e80;

const OP_FLUSH: u8 = 0x00;
const OP_WRITE: u8 = 0x01;
const OP_READ: u8 = 0x02;
const ADMIN_IDENTIFY: u8 = 0x06;
/// Force Unit Access, bit 30 of a Read's or Write's command dword 12.
const FUA: u32 = 1 << 30;
/// Milliseconds a command may take; 0 would be the driver's default.
const TIMEOUT_MS: u32 = 60_000;

/// `struct nvme_passthru_cmd` (`<linux/nvme_ioctl.h>`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct PassthruCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

/// `struct nvme_uring_cmd`, as the 80 command bytes of a 128-byte entry.
fn uring_cmd(opcode: u8, nsid: u32, addr: u64, data_len: u32, cdw: [u32; 3]) -> [u8; 80] {
    let mut cmd = [0u8; 80];
    cmd[0] = opcode;
    cmd[4..8].copy_from_slice(&nsid.to_ne_bytes());
    cmd[24..32].copy_from_slice(&addr.to_ne_bytes());
    cmd[36..40].copy_from_slice(&data_len.to_ne_bytes());
    cmd[40..44].copy_from_slice(&cdw[0].to_ne_bytes());
    cmd[44..48].copy_from_slice(&cdw[1].to_ne_bytes());
    cmd[48..52].copy_from_slice(&cdw[2].to_ne_bytes());
    cmd[64..68].copy_from_slice(&TIMEOUT_MS.to_ne_bytes());
    cmd
}

/// Command dwords 10-12 of a Read or Write: the starting block, and the
/// count less one.
fn read_write_dwords(lba: u64, blocks: u32, fua: bool) -> [u32; 3] {
    let mut cdw12 = blocks - 1;
    if fua {
        cdw12 |= FUA;
    }
    [lba as u32, (lba >> 32) as u32, cdw12]
}

/// An NVMe status (status code type in bits 8-10, code in 0-7, as the
/// driver returns it) in the specification's words.
pub fn status_text(status: u16) -> String {
    let sct = (status >> 8) & 0x7;
    let sc = status & 0xff;
    let text = match (sct, sc) {
        (0, 0x01) => "invalid command opcode",
        (0, 0x02) => "invalid field in command",
        (0, 0x04) => "data transfer error",
        (0, 0x05) => "commands aborted due to power loss notification",
        (0, 0x06) => "internal error",
        (0, 0x07) => "command abort requested",
        (0, 0x0b) => "invalid namespace or format",
        (0, 0x80) => "LBA out of range",
        (0, 0x81) => "capacity exceeded",
        (0, 0x82) => "namespace not ready",
        (0, 0x83) => "reservation conflict",
        (0, 0x84) => "format in progress",
        (1, 0x82) => "attempted write to read only range",
        (2, 0x80) => "write fault",
        (2, 0x81) => "unrecovered read error",
        (2, 0x82) => "end-to-end guard check error",
        (2, 0x83) => "end-to-end application tag check error",
        (2, 0x84) => "end-to-end reference tag check error",
        (2, 0x85) => "compare failure",
        (2, 0x86) => "access denied",
        (2, 0x87) => "deallocated or unwritten logical block",
        _ => return format!("NVMe status (sct {sct:x}h, sc {sc:02x}h)"),
    };
    format!("{text} (sct {sct:x}h, sc {sc:02x}h)")
}

/// The errno the block device would give for an NVMe status.
fn status_errno(status: u16) -> Errno {
    let sct = (status >> 8) & 0x7;
    let sc = status & 0xff;
    match (sct, sc) {
        (0, 0x80) | (0, 0x81) => Errno::NOSPC,
        (0, 0x01) | (0, 0x02) | (0, 0x0b) => Errno::INVAL,
        (0, 0x83) => Errno::BUSY,
        (1, 0x82) => Errno::ROFS,
        _ => Errno::IO,
    }
}

fn failure(what: &str, result: i32) -> CommandError {
    if result == -libc::EINTR {
        // Not a signal: the NVMe driver completes a command it cancelled
        // (its timeout passed and the controller was reset, or the
        // controller went away) with EINTR, and says nothing else.
        return CommandError {
            errno: Errno::IO,
            cause: format!(
                "{what}: the kernel cancelled the command (no answer within its {} s \
                 timeout, or the controller was reset)",
                TIMEOUT_MS / 1000
            ),
            bad_block: None,
        };
    }
    if result < 0 {
        return CommandError::system(Errno::from_raw_os_error(-result), what);
    }
    let status = result as u16;
    CommandError {
        errno: status_errno(status),
        cause: format!("{what}: {}", status_text(status)),
        bad_block: None,
    }
}

/// A namespace's size and format, from Identify Namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Namespace {
    pub blocks: u64,
    pub block_len: u32,
    /// Metadata bytes per block (0 for plain data).
    pub metadata: u16,
}

/// Identify Namespace's 4096 bytes, read: NSZE, and FLBAS's format in the
/// LBA format table (LBADS a power of two, MS its metadata).
pub fn parse_identify(data: &[u8]) -> Option<Namespace> {
    let blocks = u64::from_le_bytes(data.get(0..8)?.try_into().ok()?);
    let formats = usize::from(*data.get(25)?) + 1;
    let flbas = *data.get(26)?;
    // Bits 0-3, and bits 5-6 above them where more than 16 formats exist.
    let index = usize::from(flbas & 0x0f) | (usize::from((flbas >> 5) & 0x3) << 4);
    if index >= formats.max(1) {
        return None;
    }
    let format = data.get(128 + 4 * index..128 + 4 * index + 4)?;
    let metadata = u16::from_le_bytes([format[0], format[1]]);
    let shift = format[2];
    if !(9..=20).contains(&shift) {
        return None;
    }
    Some(Namespace {
        blocks,
        block_len: 1 << shift,
        metadata,
    })
}

/// Where a slot stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Idle,
    Busy(Op),
}

/// NVMe Read and Write commands to one namespace, through its generic
/// node and an io_uring of big entries.
pub struct NvmeQueue {
    fd: OwnedFd,
    nsid: u32,
    geometry: Geometry,
    ring: IoUring<squeue::Entry128, cqueue::Entry32>,
    buffers: Vec<AlignedBuf>,
    state: Vec<SlotState>,
    in_flight: usize,
}

impl std::fmt::Debug for NvmeQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NvmeQueue(nsid {}, {} slots, {} in flight)",
            self.nsid,
            self.state.len(),
            self.in_flight
        )
    }
}

impl NvmeQueue {
    /// Take `fd` (an ngXnY node), identify its namespace and set up a
    /// ring of `depth` slots. `block_device` names the namespace's block
    /// device, for its queue limits.
    pub fn open(
        fd: OwnedFd,
        depth: usize,
        block_device: Option<&str>,
    ) -> Result<NvmeQueue, CommandError> {
        // SAFETY: NVME_IOCTL_ID takes no argument and returns the id.
        let nsid = unsafe { libc::ioctl(fd.as_raw_fd(), NVME_IOCTL_ID as _) };
        if nsid <= 0 {
            return Err(CommandError::system(last_errno(), "NVME_IOCTL_ID"));
        }
        let nsid = nsid as u32;
        let namespace = identify(&fd, nsid)?;
        if namespace.metadata != 0 {
            return Err(CommandError {
                errno: Errno::NOTSUP,
                cause: format!(
                    "the namespace's blocks carry {} bytes of metadata each, which ddx \
                     does not copy",
                    namespace.metadata
                ),
                bad_block: None,
            });
        }
        let limit = passthrough::command_limit(block_device);
        let max_blocks = (limit / namespace.block_len as usize).clamp(1, 1 << 16) as u32;
        let depth = depth.clamp(1, 1024);
        let ring = IoUring::<squeue::Entry128, cqueue::Entry32>::builder()
            .build(depth.next_power_of_two() as u32)
            .map_err(|e| {
                CommandError::system(
                    Errno::from_io_error(&e).unwrap_or(Errno::IO),
                    "setting up io_uring with 128-byte entries (Linux 5.19 or later)",
                )
            })?;
        let len = max_blocks as usize * namespace.block_len as usize;
        let buffers = passthrough::slot_buffers(depth, len)
            .map_err(|e| CommandError::system(e, "allocating command buffers"))?;
        Ok(NvmeQueue {
            fd,
            nsid,
            geometry: Geometry {
                block_len: namespace.block_len,
                blocks: namespace.blocks,
                max_blocks,
            },
            ring,
            buffers,
            state: vec![SlotState::Idle; depth],
            in_flight: 0,
        })
    }

    fn what(op: Op) -> &'static str {
        match op {
            Op::Read => "NVMe Read",
            Op::Write { .. } => "NVMe Write",
        }
    }
}

/// Identify Namespace through the admin passthrough ioctl.
fn identify(fd: &OwnedFd, nsid: u32) -> Result<Namespace, CommandError> {
    let mut data = AlignedBuf::new(4096).map_err(|e| CommandError::system(e, "a buffer"))?;
    let mut cmd = PassthruCmd {
        opcode: ADMIN_IDENTIFY,
        nsid,
        addr: data.as_mut_slice().as_mut_ptr() as u64,
        data_len: 4096,
        timeout_ms: TIMEOUT_MS,
        ..PassthruCmd::default()
    };
    // SAFETY: the admin ioctl reads the command and writes at most
    // `data_len` (4096) bytes to `addr`, the buffer borrowed mutably for
    // this synchronous call, and the result into the command.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), NVME_IOCTL_ADMIN_CMD as _, &mut cmd) };
    if rc != 0 {
        return Err(if rc < 0 {
            CommandError::system(last_errno(), "Identify Namespace")
        } else {
            failure("Identify Namespace", rc)
        });
    }
    parse_identify(data.as_slice()).ok_or_else(|| CommandError {
        errno: Errno::IO,
        cause: "Identify Namespace: no usable LBA format".into(),
        bad_block: None,
    })
}

fn last_errno() -> Errno {
    Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO)
}

impl CommandQueue for NvmeQueue {
    fn interface(&self) -> Interface {
        Interface::NvmeGeneric
    }

    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn slots(&self) -> usize {
        self.state.len()
    }

    fn describe(&self) -> String {
        format!(
            "NVMe Read and Write on namespace {} through io_uring URING_CMD",
            self.nsid
        )
    }

    fn buffer(&self, slot: usize) -> Option<&[u8]> {
        (*self.state.get(slot)? == SlotState::Idle).then(|| self.buffers[slot].as_slice())
    }

    fn buffer_mut(&mut self, slot: usize) -> Option<&mut [u8]> {
        (*self.state.get(slot)? == SlotState::Idle).then(|| self.buffers[slot].as_mut_slice())
    }

    /// A slot's buffer goes to the engine and the engine's takes its
    /// place: commands take their buffer's address when they are sent.
    fn exchange(&mut self, slot: usize, buf: &mut AlignedBuf) -> bool {
        let len = self.geometry.max_blocks as usize * self.geometry.block_len as usize;
        self.state.get(slot) == Some(&SlotState::Idle)
            && passthrough::exchange_slot(&mut self.buffers[slot], len, buf)
    }

    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), CommandError> {
        match self.state.get(slot) {
            Some(SlotState::Idle) => {}
            Some(SlotState::Busy(_)) => {
                return Err(CommandError::system(Errno::BUSY, "command slot"))
            }
            None => return Err(CommandError::system(Errno::INVAL, "no such command slot")),
        }
        if blocks == 0 || blocks > self.geometry.max_blocks {
            return Err(CommandError::system(Errno::INVAL, "command length"));
        }
        let len = blocks * self.geometry.block_len;
        let addr = self.buffers[slot].as_mut_slice().as_mut_ptr() as u64;
        let (opcode, fua) = match op {
            Op::Read => (OP_READ, false),
            Op::Write { fua } => (OP_WRITE, fua),
        };
        let cmd = uring_cmd(
            opcode,
            self.nsid,
            addr,
            len,
            read_write_dwords(lba, blocks, fua),
        );
        let entry = opcode::UringCmd80::new(types::Fd(self.fd.as_raw_fd()), NVME_URING_CMD_IO)
            .cmd(cmd)
            .build()
            .user_data(slot as u64);
        loop {
            // SAFETY: the command points at slot `slot`'s buffer (`len`
            // bytes, within it: `blocks` is at most `max_blocks`), which
            // is idle and marked busy below: it is neither handed out nor
            // freed until its completion is reaped in wait() or Drop.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                break;
            }
            if let Err(e) = self.ring.submit() {
                return Err(CommandError::system(
                    Errno::from_io_error(&e).unwrap_or(Errno::IO),
                    "io_uring_enter",
                ));
            }
        }
        self.state[slot] = SlotState::Busy(op);
        self.in_flight += 1;
        // To the device now, as the sg driver's write(2) sends a SCSI
        // command: left in the ring until the next wait, a command would
        // idle while the copy fills other slots. The command is queued
        // either way; where this fails, the next wait submits it and
        // reports what still fails.
        let _ = self.ring.submit();
        Ok(())
    }

    fn wait(&mut self) -> Option<(usize, Result<(), CommandError>)> {
        if self.in_flight == 0 {
            return None;
        }
        loop {
            if let Some(cqe) = self.ring.completion().next() {
                let slot = cqe.user_data() as usize;
                let SlotState::Busy(op) = self.state.get(slot).copied()? else {
                    continue;
                };
                self.state[slot] = SlotState::Idle;
                self.in_flight -= 1;
                let outcome = match cqe.result() {
                    0 => Ok(()),
                    // io_uring without URING_CMD (before 5.19), or a
                    // driver without it.
                    r if r == -libc::EINVAL || r == -libc::EOPNOTSUPP => Err(CommandError::system(
                        Errno::from_raw_os_error(-r),
                        "NVMe command through io_uring (Linux 5.19 or later)",
                    )),
                    r => Err(failure(Self::what(op), r)),
                };
                return Some((slot, outcome));
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) => {
                    let errno = Errno::from_io_error(&e).unwrap_or(Errno::IO);
                    if matches!(errno, Errno::INTR | Errno::AGAIN | Errno::BUSY) {
                        continue;
                    }
                    // The ring cannot be waited on: leak the buffers
                    // rather than free memory the kernel may still write.
                    let slot = self.state.iter().position(|s| *s != SlotState::Idle)?;
                    self.in_flight = 0;
                    std::mem::forget(std::mem::take(&mut self.buffers));
                    self.state.clear();
                    return Some((slot, Err(CommandError::system(errno, "io_uring_enter"))));
                }
            }
        }
    }

    fn flush(&mut self) -> Result<(), CommandError> {
        let mut cmd = PassthruCmd {
            opcode: OP_FLUSH,
            nsid: self.nsid,
            timeout_ms: TIMEOUT_MS,
            ..PassthruCmd::default()
        };
        // SAFETY: a Flush moves no data; the ioctl reads the command and
        // writes its result field.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), NVME_IOCTL_IO_CMD as _, &mut cmd) };
        match rc {
            0 => Ok(()),
            r if r < 0 => Err(failure("NVMe Flush", -last_errno().raw_os_error())),
            r => Err(failure("NVMe Flush", r)),
        }
    }
}

impl Drop for NvmeQueue {
    fn drop(&mut self) {
        while self.in_flight > 0 && self.wait().is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_layouts_are_the_kernels() {
        assert_eq!(std::mem::size_of::<PassthruCmd>(), 72);
        let cmd = uring_cmd(
            OP_READ,
            1,
            0x1000,
            8192,
            read_write_dwords(0x1_0000_0002, 16, false),
        );
        assert_eq!(cmd[0], 0x02);
        assert_eq!(u32::from_ne_bytes(cmd[4..8].try_into().unwrap()), 1);
        assert_eq!(u64::from_ne_bytes(cmd[24..32].try_into().unwrap()), 0x1000);
        assert_eq!(u32::from_ne_bytes(cmd[36..40].try_into().unwrap()), 8192);
        assert_eq!(u32::from_ne_bytes(cmd[40..44].try_into().unwrap()), 2);
        assert_eq!(u32::from_ne_bytes(cmd[44..48].try_into().unwrap()), 1);
        assert_eq!(u32::from_ne_bytes(cmd[48..52].try_into().unwrap()), 15);
        assert_eq!(read_write_dwords(0, 1, true)[2], FUA);
    }

    #[test]
    fn identify_namespace_gives_the_size_and_format() {
        let mut data = vec![0u8; 4096];
        data[0..8].copy_from_slice(&131072u64.to_le_bytes());
        data[25] = 1; // two formats
        data[26] = 1; // the second in use
        data[128 + 2] = 9; // 512 bytes
        data[132 + 2] = 12; // 4096 bytes
        assert_eq!(
            parse_identify(&data),
            Some(Namespace {
                blocks: 131072,
                block_len: 4096,
                metadata: 0
            })
        );
        data[26] = 5; // a format that is not there
        assert_eq!(parse_identify(&data), None);
        assert_eq!(parse_identify(&data[..20]), None);
    }

    #[test]
    fn statuses_read_as_the_specification_words_them() {
        assert_eq!(
            status_text(0x281),
            "unrecovered read error (sct 2h, sc 81h)"
        );
        assert_eq!(status_text(0x080), "LBA out of range (sct 0h, sc 80h)");
        assert_eq!(status_text(0x3ff), "NVMe status (sct 3h, sc ffh)");
        assert_eq!(status_errno(0x281), Errno::IO);
        assert_eq!(status_errno(0x080), Errno::NOSPC);
    }

    #[test]
    fn a_cancelled_command_is_named_as_one_not_as_a_signal() {
        let e = failure("NVMe Read", -libc::EINTR);
        assert_eq!(e.errno, Errno::IO);
        assert!(
            e.cause
                .starts_with("NVMe Read: the kernel cancelled the command"),
            "{}",
            e.cause
        );
        assert!(!e.cause.contains("nterrupted"), "{}", e.cause);
        let e = failure("NVMe Write", -libc::ENOSPC);
        assert_eq!(e.errno, Errno::NOSPC);
    }

    /// The status a device returns is 16 bits: every one of them reads
    /// as one line naming its type and code (a fuzzer has nothing more
    /// to find in so small a space).
    #[test]
    fn every_status_reads_as_one_line_with_its_codes() {
        for status in 0..=u16::MAX {
            let text = status_text(status);
            let (sct, sc) = ((status >> 8) & 0x7, status & 0xff);
            assert!(
                text.ends_with(&format!("(sct {sct:x}h, sc {sc:02x}h)")),
                "{status:#x}: {text}"
            );
            assert!(!text.chars().any(char::is_control), "{text:?}");
            let failure = failure("Read", i32::from(status));
            assert!(failure.cause.starts_with("Read: "), "{}", failure.cause);
        }
    }
}
