//! SCSI commands through the SCSI generic driver: SG_IO, as sg_dd and
//! sgp_dd send them.
//!
//! On an sg node (`/dev/sgN`) commands are kept in flight with the
//! driver's asynchronous interface: write(2) of an `sg_io_hdr` queues a
//! command, read(2) returns one that completed (its `pack_id` says which
//! slot). Where it can, each slot has a descriptor of its own on the node
//! whose reserve buffer is mapped into ddx (`SG_FLAG_MMAP_IO`, as sg_dd's
//! `iflag=mmap`): the device's data lands in those pages and is sent from
//! them, where the driver's default (indirect) transfer fills fresh,
//! zeroed kernel pages for every command and copies them to or from the
//! caller's buffer: two passes over every byte that the mapping spares.
//! Only one command at a time may use a descriptor's reserve buffer,
//! hence a descriptor per slot. A bsg node (`/dev/bsg/H:C:T:L`) has only the synchronous SG_IO
//! ioctl with the v4 header: its commands run one at a time, each to
//! completion, in [`ScsiQueue::submit`].
//!
//! A command that ends in CHECK CONDITION carries sense data, which
//! `sense` decodes into the one line a person reads and the block the
//! device names; a unit attention or an aborted command is sent again (a
//! few times), as the block layer would. The errno of a failure is the
//! one the block device of the same disk would give (EIO for a medium or
//! hardware error).

pub mod cdb;
pub mod sense;

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use cdb::{Addressing, Capacity, Cdb};
use sense::{Sense, SenseKey};

use super::buffer::AlignedBuf;
use super::passthrough::{self, CommandError, CommandQueue, Geometry, Interface, Op};
use super::Errno;

/// `SG_IO`: run one command, synchronously (both headers).
const SG_IO: libc::c_ulong = 0x2285;
const SG_DXFER_NONE: i32 = -1;
const SG_DXFER_TO_DEV: i32 = -2;
const SG_DXFER_FROM_DEV: i32 = -3;
/// Queue at the tail of the device's queue (the v3 default is the head,
/// which reverses a stream of commands kept in flight).
const SG_FLAG_Q_AT_TAIL: u32 = 0x10;
/// The command's data is the descriptor's reserve buffer, as mapped.
const SG_FLAG_MMAP_IO: u32 = 0x20;
const SG_GET_RESERVED_SIZE: libc::c_ulong = 0x2272;
const SG_SET_RESERVED_SIZE: libc::c_ulong = 0x2275;
/// The sg driver's limit on commands in flight per open file.
const SG_MAX_QUEUE: usize = 16;
const SENSE_LEN: usize = 64;
/// Milliseconds a command may take (sg_dd's default).
const TIMEOUT_MS: u32 = 60_000;
/// Sending a command again after a unit attention or an abort.
const RETRIES: u8 = 3;

/// `struct sg_io_hdr` (the v3 interface, `<scsi/sg.h>`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct SgIoHdr {
    interface_id: i32,
    dxfer_direction: i32,
    cmd_len: u8,
    mx_sb_len: u8,
    iovec_count: u16,
    dxfer_len: u32,
    dxferp: *mut libc::c_void,
    cmdp: *const u8,
    sbp: *mut u8,
    timeout: u32,
    flags: u32,
    pack_id: i32,
    usr_ptr: *mut libc::c_void,
    status: u8,
    masked_status: u8,
    msg_status: u8,
    sb_len_wr: u8,
    host_status: u16,
    driver_status: u16,
    resid: i32,
    duration: u32,
    info: u32,
}

/// `struct sg_io_v4` (`<linux/bsg.h>`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct SgIoV4 {
    guard: i32,
    protocol: u32,
    subprotocol: u32,
    request_len: u32,
    request: u64,
    request_tag: u64,
    request_attr: u32,
    request_priority: u32,
    request_extra: u32,
    max_response_len: u32,
    response: u64,
    dout_iovec_count: u32,
    dout_xfer_len: u32,
    din_iovec_count: u32,
    din_xfer_len: u32,
    dout_xferp: u64,
    din_xferp: u64,
    timeout: u32,
    flags: u32,
    usr_ptr: u64,
    spare_in: u32,
    driver_status: u32,
    transport_status: u32,
    device_status: u32,
    retry_delay: u32,
    info: u32,
    duration: u32,
    response_len: u32,
    din_resid: i32,
    dout_resid: i32,
    generated_tag: u64,
    spare_out: u32,
    padding: u32,
}

impl SgIoHdr {
    fn zeroed() -> SgIoHdr {
        SgIoHdr {
            interface_id: 0,
            dxfer_direction: 0,
            cmd_len: 0,
            mx_sb_len: 0,
            iovec_count: 0,
            dxfer_len: 0,
            dxferp: std::ptr::null_mut(),
            cmdp: std::ptr::null(),
            sbp: std::ptr::null_mut(),
            timeout: 0,
            flags: 0,
            pack_id: 0,
            usr_ptr: std::ptr::null_mut(),
            status: 0,
            masked_status: 0,
            msg_status: 0,
            sb_len_wr: 0,
            host_status: 0,
            driver_status: 0,
            resid: 0,
            duration: 0,
            info: 0,
        }
    }
}

/// Where a command's data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transfer {
    None,
    ToDevice,
    FromDevice,
}

/// How a command ended, as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Status {
    /// SAM status byte (GOOD, CHECK CONDITION, BUSY...).
    scsi: u8,
    /// The initiator's (DID_*), 0 when it delivered the command.
    host: u16,
    /// The driver's (DRIVER_*; DRIVER_SENSE alone is not an error).
    driver: u16,
}

/// What a finished command means: done, worth sending again, or failed.
fn judge(status: Status, sense: &[u8], what: &str) -> Result<(), (CommandError, bool)> {
    const CHECK_CONDITION: u8 = 0x02;
    const DRIVER_SENSE: u16 = 0x08;
    let decoded = Sense::parse(sense);
    if status.host != 0 {
        let errno = match status.host {
            3 => Errno::TIMEDOUT,
            1 | 4 => Errno::NXIO,
            _ => Errno::IO,
        };
        let retry = matches!(status.host, 2 | 8 | 11 | 12 | 13 | 14);
        return Err((
            CommandError {
                errno,
                cause: format!("{what}: {}", host_text(status.host)),
                bad_block: None,
            },
            retry,
        ));
    }
    match status.scsi & 0x7e {
        0x00 | 0x04 if status.driver & !DRIVER_SENSE == 0 => return Ok(()),
        CHECK_CONDITION => {
            let Some(sense) = decoded else {
                return Err((
                    CommandError {
                        errno: Errno::IO,
                        cause: format!("{what}: check condition without sense data"),
                        bad_block: None,
                    },
                    false,
                ));
            };
            if sense.is_success() {
                return Ok(());
            }
            let errno = match (sense.key, sense.asc) {
                (SenseKey::DataProtect, 0x27) => Errno::ROFS,
                (SenseKey::NotReady, 0x3a) => Errno::NOMEDIUM,
                (SenseKey::IllegalRequest, 0x21) => Errno::NOSPC,
                (SenseKey::IllegalRequest, _) => Errno::INVAL,
                _ => Errno::IO,
            };
            let bad_block = match sense.key {
                SenseKey::MediumError | SenseKey::HardwareError => sense.information,
                _ => None,
            };
            return Err((
                CommandError {
                    errno,
                    cause: sense.to_string(),
                    bad_block,
                },
                sense.worth_retrying(),
            ));
        }
        _ => {}
    }
    let (text, errno, retry) = match status.scsi & 0x7e {
        0x08 => ("device busy".to_owned(), Errno::BUSY, true),
        0x18 => ("reservation conflict".to_owned(), Errno::BUSY, false),
        0x28 => ("task set full".to_owned(), Errno::BUSY, true),
        0x40 => ("task aborted".to_owned(), Errno::IO, true),
        0x00 => (
            format!("driver status 0x{:x}", status.driver),
            Errno::IO,
            false,
        ),
        other => (format!("SCSI status 0x{other:02x}"), Errno::IO, false),
    };
    Err((
        CommandError {
            errno,
            cause: format!("{what}: {text}"),
            bad_block: None,
        },
        retry,
    ))
}

/// What a command that ended with SAM status `scsi`, initiator status
/// `host`, driver status `driver` and the `sense` bytes means, as
/// [`judge`] decides it for a READ(10): for the fuzz target, whose input
/// is what a device may answer.
pub(crate) fn judge_read(
    scsi: u8,
    host: u16,
    driver: u16,
    sense: &[u8],
) -> Result<(), (CommandError, bool)> {
    judge(Status { scsi, host, driver }, sense, "READ(10)")
}

/// The initiator's DID_* code in words.
fn host_text(code: u16) -> String {
    let text = match code {
        1 => "no connection to the device",
        2 => "bus busy",
        3 => "command timed out",
        4 => "bad target",
        5 => "command aborted",
        6 => "parity error",
        7 => "internal error in the host adapter",
        8 => "bus reset",
        9 => "unexpected interrupt",
        10 => "passthrough error",
        11 => "soft error, retry",
        12 => "retry immediately",
        13 => "requeue",
        14 => "transport disrupted",
        15 => "transport failed fast",
        16 => "target failure",
        17 => "nexus failure",
        18 => "space allocation failure",
        19 => "medium error",
        _ => return format!("host status 0x{code:x}"),
    };
    text.to_owned()
}

/// A descriptor of its own on the sg node, with the driver's reserve
/// buffer for it mapped: a command sent on it with `SG_FLAG_MMAP_IO` reads
/// into and writes from those pages, without a copy on either side.
#[derive(Debug)]
struct Reserve {
    fd: OwnedFd,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone (as an AlignedBuf's
// is), and the pages behind it are the kernel's, kept until the
// descriptor and the mapping are both gone: moving it to another thread
// moves nothing the thread could race on.
unsafe impl Send for Reserve {}

impl Reserve {
    /// Open the node of `fd` again (its own descriptor, so its own reserve
    /// buffer), make the reserve buffer `len` bytes and map it. An error
    /// where the driver gives less (it halves what it cannot allocate) or
    /// does not map it.
    fn open(fd: &OwnedFd, len: usize) -> Result<Reserve, Errno> {
        let again = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let own = rustix::fs::open(
            again.as_str(),
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let want = libc::c_int::try_from(len).map_err(|_| Errno::NOMEM)?;
        let mut got: libc::c_int = 0;
        // SAFETY: SG_SET_RESERVED_SIZE reads one int from the pointer
        // given, SG_GET_RESERVED_SIZE writes one; both are locals alive
        // for the calls.
        let rc = unsafe {
            if libc::ioctl(own.as_raw_fd(), SG_SET_RESERVED_SIZE as _, &want) < 0 {
                -1
            } else {
                libc::ioctl(own.as_raw_fd(), SG_GET_RESERVED_SIZE as _, &mut got)
            }
        };
        if rc < 0 {
            return Err(last_errno());
        }
        if got < want {
            return Err(Errno::NOMEM);
        }
        // SAFETY: a fresh shared mapping of the node with a null hint
        // aliases no memory of ours; the sg driver maps its reserve
        // buffer there (at most its size, which `got` checked).
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                &own,
                0,
            )?
        };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(Errno::NOMEM)?;
        Ok(Reserve { fd: own, ptr, len })
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly the mapping made in `open`; no
        // slice of it outlives self. The descriptor closes after.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Where a slot's data is: a buffer of ddx's own, which the driver copies
/// to or from, or a reserve buffer mapped from the driver.
#[derive(Debug)]
enum Data {
    Own(AlignedBuf),
    Mapped(Reserve),
}

impl Data {
    fn as_slice(&self) -> &[u8] {
        match self {
            Data::Own(buf) => buf.as_slice(),
            // SAFETY: the mapping holds `len` readable bytes while the
            // value lives; the device writes them only while a command
            // of the slot is in flight, and the queue lends no slice of
            // a busy slot.
            Data::Mapped(r) => unsafe { std::slice::from_raw_parts(r.ptr.as_ptr(), r.len) },
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            Data::Own(buf) => buf.as_mut_slice(),
            // SAFETY: as in `as_slice`, and `&mut self` makes the slice
            // the only one.
            Data::Mapped(r) => unsafe { std::slice::from_raw_parts_mut(r.ptr.as_ptr(), r.len) },
        }
    }
}

/// One slot: its data buffer, sense buffer and command block stay where
/// they are while the kernel holds the command (the driver writes the
/// data and the sense when the completion is read).
#[derive(Debug)]
struct Slot {
    buf: Data,
    sense: Box<[u8; SENSE_LEN]>,
    cdb: Box<Cdb>,
    /// The command in flight and how often it was sent; None when idle.
    busy: Option<(Op, u64, u32, u8)>,
}

/// SCSI commands to one disk through its sg or bsg node.
#[derive(Debug)]
pub struct ScsiQueue {
    fd: OwnedFd,
    interface: Interface,
    geometry: Geometry,
    addressing: Addressing,
    slots: Vec<Slot>,
    /// Completions of a bsg node's commands, run at submission.
    finished: VecDeque<(usize, Result<(), CommandError>)>,
    in_flight: usize,
    /// Slots with descriptors of their own, in the order their commands
    /// were sent: the oldest is the one waited for.
    sent: VecDeque<usize>,
}

impl ScsiQueue {
    /// Take `fd` (an sg or bsg node opened read-write) and read the
    /// disk's capacity; `depth` slots (at most the driver's 16 on sg;
    /// one on bsg, whose commands run one at a time). `block_device`
    /// names the disk's block device for its queue limits. With `mapped`,
    /// an sg node's slots are reserve buffers mapped from the driver,
    /// each on a descriptor of its own, where the driver allows it (else
    /// buffers of ddx's own, copied by the driver, as fio's `sg` engine
    /// and sgp_dd send theirs).
    pub fn open(
        fd: OwnedFd,
        interface: Interface,
        depth: usize,
        block_device: Option<&str>,
        mapped: bool,
    ) -> Result<ScsiQueue, CommandError> {
        let mut queue = ScsiQueue {
            fd,
            interface,
            geometry: Geometry {
                block_len: 512,
                blocks: 0,
                max_blocks: 1,
            },
            addressing: Addressing::Short,
            slots: Vec::new(),
            finished: VecDeque::new(),
            in_flight: 0,
            sent: VecDeque::new(),
        };
        let capacity = queue.read_capacity()?;
        if capacity.block_len == 0 || !capacity.block_len.is_power_of_two() {
            return Err(CommandError {
                errno: Errno::NOTSUP,
                cause: format!(
                    "READ CAPACITY: a logical block of {} bytes is not supported",
                    capacity.block_len
                ),
                bad_block: None,
            });
        }
        queue.addressing = Addressing::for_capacity(capacity.blocks);
        let limit = passthrough::command_limit(block_device);
        let max_blocks = (limit / capacity.block_len as usize)
            .clamp(1, queue.addressing.max_blocks() as usize) as u32;
        queue.geometry = Geometry {
            block_len: capacity.block_len,
            blocks: capacity.blocks,
            max_blocks,
        };
        let depth = match interface {
            Interface::Bsg => 1,
            _ => depth.clamp(1, SG_MAX_QUEUE),
        };
        let len = max_blocks as usize * capacity.block_len as usize;
        let reserves = match interface {
            Interface::ScsiGeneric if mapped => (0..depth)
                .map(|_| Reserve::open(&queue.fd, len))
                .collect::<Result<Vec<_>, _>>()
                .ok(),
            _ => None,
        };
        let buffers = match reserves {
            Some(reserves) => reserves.into_iter().map(Data::Mapped).collect(),
            None => passthrough::slot_buffers(depth, len)
                .map_err(|e| CommandError::system(e, "allocating command buffers"))?
                .into_iter()
                .map(Data::Own)
                .collect::<Vec<_>>(),
        };
        queue.slots = buffers
            .into_iter()
            .map(|buf| Slot {
                buf,
                sense: Box::new([0; SENSE_LEN]),
                cdb: Box::new(cdb::synchronize_cache()),
                busy: None,
            })
            .collect();
        Ok(queue)
    }

    /// READ CAPACITY (10), and (16) where the disk is too large for it.
    fn read_capacity(&mut self) -> Result<Capacity, CommandError> {
        let mut data = [0u8; cdb::CAPACITY_16_LEN];
        self.execute(
            &cdb::read_capacity_10(),
            Transfer::FromDevice,
            &mut data[..8],
            "READ CAPACITY(10)",
        )?;
        let ten = cdb::capacity_10(&data).expect("eight bytes");
        if ten.blocks <= u64::from(u32::MAX) {
            return Ok(ten);
        }
        self.execute(
            &cdb::read_capacity_16(),
            Transfer::FromDevice,
            &mut data,
            "READ CAPACITY(16)",
        )?;
        cdb::capacity_16(&data).ok_or_else(|| CommandError {
            errno: Errno::IO,
            cause: "READ CAPACITY(16): the capacity is out of range".into(),
            bad_block: None,
        })
    }

    /// Run one command synchronously (SG_IO), sending it again while the
    /// device asks for that.
    fn execute(
        &self,
        cdb: &Cdb,
        transfer: Transfer,
        data: &mut [u8],
        what: &str,
    ) -> Result<(), CommandError> {
        let mut tries = 0;
        loop {
            let mut sense = [0u8; SENSE_LEN];
            let status = match self.interface {
                Interface::Bsg => self.sg_io_v4(cdb, transfer, data, &mut sense)?,
                _ => self.sg_io_v3(cdb, transfer, data, &mut sense)?,
            };
            match judge(status, &sense, what) {
                Ok(()) => return Ok(()),
                Err((_, true)) if tries < RETRIES => tries += 1,
                Err((error, _)) => return Err(error),
            }
        }
    }

    fn sg_io_v3(
        &self,
        cdb: &Cdb,
        transfer: Transfer,
        data: &mut [u8],
        sense: &mut [u8; SENSE_LEN],
    ) -> Result<Status, CommandError> {
        let mut hdr = header(cdb, transfer, data.as_mut_ptr(), data.len(), sense);
        // SAFETY: SG_IO takes a pointer to an sg_io_hdr, whose pointers
        // (command block, data, sense) point into `cdb`, `data` and
        // `sense`, all borrowed for this call and as long as their
        // lengths in the header; the ioctl returns after the command
        // completed, and nothing is kept past it.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), SG_IO as _, &mut hdr) };
        if rc < 0 {
            return Err(CommandError::system(last_errno(), "SG_IO"));
        }
        Ok(Status {
            scsi: hdr.status,
            host: hdr.host_status,
            driver: hdr.driver_status,
        })
    }

    fn sg_io_v4(
        &self,
        cdb: &Cdb,
        transfer: Transfer,
        data: &mut [u8],
        sense: &mut [u8; SENSE_LEN],
    ) -> Result<Status, CommandError> {
        let mut hdr = SgIoV4 {
            guard: i32::from(b'Q'),
            request_len: u32::from(cdb.len),
            request: cdb.bytes.as_ptr() as u64,
            max_response_len: SENSE_LEN as u32,
            response: sense.as_mut_ptr() as u64,
            timeout: TIMEOUT_MS,
            ..SgIoV4::default()
        };
        match transfer {
            Transfer::None => {}
            Transfer::ToDevice => {
                hdr.dout_xfer_len = data.len() as u32;
                hdr.dout_xferp = data.as_ptr() as u64;
            }
            Transfer::FromDevice => {
                hdr.din_xfer_len = data.len() as u32;
                hdr.din_xferp = data.as_mut_ptr() as u64;
            }
        }
        // SAFETY: as for `sg_io_v3`: the header's addresses are of
        // `cdb`, `data` and `sense`, borrowed for this synchronous call.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), SG_IO as _, &mut hdr) };
        if rc < 0 {
            return Err(CommandError::system(last_errno(), "SG_IO"));
        }
        Ok(Status {
            scsi: hdr.device_status as u8,
            host: hdr.transport_status as u16,
            driver: hdr.driver_status as u16,
        })
    }

    fn command(&self, op: Op, lba: u64, blocks: u32) -> Cdb {
        match op {
            Op::Read => cdb::read_write(self.addressing, false, lba, blocks, false),
            Op::Write { fua } => cdb::read_write(self.addressing, true, lba, blocks, fua),
        }
    }

    fn what(&self, op: Op) -> &'static str {
        match op {
            Op::Read => self.addressing.read_name(),
            Op::Write { .. } => self.addressing.write_name(),
        }
    }

    /// Queue the command of `slot` with the sg driver (write(2) of its
    /// header).
    fn send(&mut self, slot: usize) -> Result<(), CommandError> {
        let (op, lba, blocks, _) = self.slots[slot].busy.expect("a command to send");
        let cdb = self.command(op, lba, blocks);
        let len = blocks as usize * self.geometry.block_len as usize;
        let transfer = match op {
            Op::Read => Transfer::FromDevice,
            Op::Write { .. } => Transfer::ToDevice,
        };
        let s = &mut self.slots[slot];
        *s.cdb = cdb;
        // A mapped slot's data is its descriptor's reserve buffer: no
        // address goes with the command.
        let (fd, data, flags) = match &mut s.buf {
            Data::Own(buf) => (
                self.fd.as_raw_fd(),
                buf.as_mut_slice()[..len].as_mut_ptr(),
                0,
            ),
            Data::Mapped(reserve) => (
                reserve.fd.as_raw_fd(),
                std::ptr::null_mut(),
                SG_FLAG_MMAP_IO,
            ),
        };
        let mut hdr = header(&s.cdb, transfer, data, len, &mut s.sense);
        hdr.flags |= SG_FLAG_Q_AT_TAIL | flags;
        hdr.pack_id = slot as i32;
        loop {
            // SAFETY: write(2) of an sg_io_hdr queues the command; the
            // driver copies the header and the command block now, and
            // uses the data and sense addresses until the completion is
            // read. Those are the slot's buffer and boxed sense bytes,
            // which stay put (the slot is busy: never handed out, and
            // the queue's Drop reads every completion before freeing);
            // a mapped slot's data is the driver's own pages.
            let rc = unsafe {
                libc::write(
                    fd,
                    (&hdr as *const SgIoHdr).cast(),
                    std::mem::size_of::<SgIoHdr>(),
                )
            };
            if rc >= 0 {
                if flags != 0 {
                    self.sent.push_back(slot);
                }
                return Ok(());
            }
            let errno = last_errno();
            if errno != Errno::INTR {
                return Err(CommandError::system(errno, "queueing a SCSI command"));
            }
        }
    }

    /// Read the next completion from the sg driver: on the shared
    /// descriptor, whichever completes first; with mapped slots, the
    /// oldest command's (commands to one disk end about in order).
    fn receive(&mut self) -> Result<(usize, Status), CommandError> {
        let fd: RawFd = if self.mapped() {
            let oldest = self
                .sent
                .pop_front()
                .ok_or_else(|| CommandError::system(Errno::IO, "a SCSI command was lost"))?;
            match &self.slots[oldest].buf {
                Data::Mapped(reserve) => reserve.fd.as_raw_fd(),
                Data::Own(_) => self.fd.as_raw_fd(),
            }
        } else {
            self.fd.as_raw_fd()
        };
        let mut hdr = SgIoHdr::zeroed();
        hdr.interface_id = i32::from(b'S');
        hdr.pack_id = -1;
        loop {
            // SAFETY: read(2) on an sg node fills one sg_io_hdr (the size
            // given) and copies the command's data and sense to the
            // addresses given when it was queued, which are its slot's
            // (busy, so alive and not lent out).
            let rc = unsafe {
                libc::read(
                    fd,
                    (&mut hdr as *mut SgIoHdr).cast(),
                    std::mem::size_of::<SgIoHdr>(),
                )
            };
            if rc >= 0 {
                break;
            }
            let errno = last_errno();
            if errno != Errno::INTR {
                return Err(CommandError::system(errno, "reading a SCSI completion"));
            }
        }
        let slot = usize::try_from(hdr.pack_id)
            .ok()
            .filter(|&s| s < self.slots.len() && self.slots[s].busy.is_some())
            .ok_or_else(|| CommandError::system(Errno::IO, "a SCSI completion for no command"))?;
        Ok((
            slot,
            Status {
                scsi: hdr.status,
                host: hdr.host_status,
                driver: hdr.driver_status,
            },
        ))
    }
}

/// errno of the system call that just failed.
fn last_errno() -> Errno {
    Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO)
}

/// A v3 header for a command on `data` (its transfer as given).
fn header(
    cdb: &Cdb,
    transfer: Transfer,
    data: *mut u8,
    len: usize,
    sense: &mut [u8; SENSE_LEN],
) -> SgIoHdr {
    let mut hdr = SgIoHdr::zeroed();
    hdr.interface_id = i32::from(b'S');
    hdr.dxfer_direction = match transfer {
        Transfer::None => SG_DXFER_NONE,
        Transfer::ToDevice => SG_DXFER_TO_DEV,
        Transfer::FromDevice => SG_DXFER_FROM_DEV,
    };
    hdr.cmd_len = cdb.len;
    hdr.mx_sb_len = SENSE_LEN as u8;
    if transfer != Transfer::None {
        hdr.dxfer_len = len as u32;
        hdr.dxferp = data.cast();
    }
    hdr.cmdp = cdb.bytes.as_ptr();
    hdr.sbp = sense.as_mut_ptr();
    hdr.timeout = TIMEOUT_MS;
    hdr
}

impl CommandQueue for ScsiQueue {
    fn interface(&self) -> Interface {
        self.interface
    }

    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn slots(&self) -> usize {
        self.slots.len()
    }

    fn describe(&self) -> String {
        let how = match self.interface {
            Interface::Bsg => "SG_IO v4, one at a time",
            _ if self.mapped() => {
                "SG_IO v3, queued with the sg driver, in its mapped reserve buffers"
            }
            _ => "SG_IO v3, queued with the sg driver",
        };
        format!(
            "{} and {} through {how}",
            self.addressing.read_name(),
            self.addressing.write_name()
        )
    }

    fn buffer(&self, slot: usize) -> Option<&[u8]> {
        let s = self.slots.get(slot)?;
        s.busy.is_none().then(|| s.buf.as_slice())
    }

    fn buffer_mut(&mut self, slot: usize) -> Option<&mut [u8]> {
        let s = self.slots.get_mut(slot)?;
        s.busy.is_none().then(|| s.buf.as_mut_slice())
    }

    /// Whether the slots are reserve buffers mapped from the driver.
    fn mapped(&self) -> bool {
        matches!(
            self.slots.first(),
            Some(Slot {
                buf: Data::Mapped(_),
                ..
            })
        )
    }

    /// Buffers of ddx's own change places; the driver's mapped ones stay.
    fn exchange(&mut self, slot: usize, buf: &mut AlignedBuf) -> bool {
        let len = self.geometry.max_blocks as usize * self.geometry.block_len as usize;
        match self.slots.get_mut(slot) {
            Some(Slot {
                buf: Data::Own(own),
                busy: None,
                ..
            }) => passthrough::exchange_slot(own, len, buf),
            _ => false,
        }
    }

    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), CommandError> {
        let Some(s) = self.slots.get(slot) else {
            return Err(CommandError::system(Errno::INVAL, "no such command slot"));
        };
        if s.busy.is_some() {
            return Err(CommandError::system(Errno::BUSY, "command slot"));
        }
        if blocks == 0 || blocks > self.geometry.max_blocks {
            return Err(CommandError::system(Errno::INVAL, "command length"));
        }
        if self.interface == Interface::Bsg {
            let cdb = self.command(op, lba, blocks);
            let len = blocks as usize * self.geometry.block_len as usize;
            let transfer = match op {
                Op::Read => Transfer::FromDevice,
                Op::Write { .. } => Transfer::ToDevice,
            };
            let what = self.what(op);
            let mut buf = std::mem::replace(
                &mut self.slots[slot].buf,
                Data::Own(AlignedBuf::new(1).map_err(|e| CommandError::system(e, "a buffer"))?),
            );
            let outcome = self.execute(&cdb, transfer, &mut buf.as_mut_slice()[..len], what);
            self.slots[slot].buf = buf;
            self.slots[slot].busy = Some((op, lba, blocks, 0));
            self.finished.push_back((slot, outcome));
            self.in_flight += 1;
            return Ok(());
        }
        self.slots[slot].busy = Some((op, lba, blocks, 0));
        if let Err(e) = self.send(slot) {
            self.slots[slot].busy = None;
            return Err(e);
        }
        self.in_flight += 1;
        Ok(())
    }

    fn wait(&mut self) -> Option<(usize, Result<(), CommandError>)> {
        if self.in_flight == 0 {
            return None;
        }
        if let Some((slot, outcome)) = self.finished.pop_front() {
            self.slots[slot].busy = None;
            self.in_flight -= 1;
            return Some((slot, outcome));
        }
        loop {
            let (slot, status) = match self.receive() {
                Ok(done) => done,
                // The driver cannot be read: every command in flight is
                // lost with it. Their buffers are leaked, not freed.
                Err(error) => {
                    let slot = self.slots.iter().position(|s| s.busy.is_some())?;
                    self.in_flight = 0;
                    let buffers: Vec<Slot> = std::mem::take(&mut self.slots);
                    std::mem::forget(buffers);
                    return Some((slot, Err(error)));
                }
            };
            let (op, lba, blocks, tries) = self.slots[slot].busy.expect("busy");
            let what = self.what(op);
            let sense_len = SENSE_LEN;
            let outcome = judge(status, &self.slots[slot].sense[..sense_len], what);
            self.slots[slot].sense.fill(0);
            match outcome {
                Err((_, true)) if tries < RETRIES => {
                    self.slots[slot].busy = Some((op, lba, blocks, tries + 1));
                    if let Err(e) = self.send(slot) {
                        self.slots[slot].busy = None;
                        self.in_flight -= 1;
                        return Some((slot, Err(e)));
                    }
                }
                outcome => {
                    self.slots[slot].busy = None;
                    self.in_flight -= 1;
                    return Some((slot, outcome.map_err(|(e, _)| e)));
                }
            }
        }
    }

    fn flush(&mut self) -> Result<(), CommandError> {
        self.execute(
            &cdb::synchronize_cache(),
            Transfer::None,
            &mut [],
            "SYNCHRONIZE CACHE(10)",
        )
    }
}

impl Drop for ScsiQueue {
    fn drop(&mut self) {
        // The driver writes into slot buffers until their completions are
        // read: read them all before the buffers go.
        while self.in_flight > 0 && !self.slots.is_empty() {
            if self.wait().is_none() {
                break;
            }
        }
    }
}

/// Whether `fd` answers as the sg driver does (SG_GET_VERSION_NUM), for
/// a node whose sysfs class could not be read.
pub fn is_sg(fd: impl AsFd) -> bool {
    const SG_GET_VERSION_NUM: libc::c_ulong = 0x2282;
    let mut version: libc::c_int = 0;
    // SAFETY: SG_GET_VERSION_NUM writes one int to the pointer given;
    // other drivers refuse the request without writing.
    let rc = unsafe {
        libc::ioctl(
            fd.as_fd().as_raw_fd(),
            SG_GET_VERSION_NUM as _,
            &mut version,
        )
    };
    rc == 0 && version >= 30000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(scsi: u8) -> Status {
        Status {
            scsi,
            host: 0,
            driver: 0,
        }
    }

    #[test]
    fn the_headers_match_the_kernels_layout() {
        assert_eq!(std::mem::size_of::<SgIoHdr>(), 88);
        assert_eq!(std::mem::size_of::<SgIoV4>(), 160);
    }

    #[test]
    fn a_medium_error_is_eio_naming_its_block() {
        let mut sense = [0u8; 18];
        sense[0] = 0xf0;
        sense[2] = 0x03;
        sense[3..7].copy_from_slice(&4660u32.to_be_bytes());
        sense[7] = 10;
        sense[12] = 0x11;
        let (error, retry) = judge(status(0x02), &sense, "READ(10)").unwrap_err();
        assert_eq!(error.errno, Errno::IO);
        assert_eq!(error.bad_block, Some(4660));
        assert_eq!(
            error.cause,
            "medium error, unrecovered read error at LBA 4660"
        );
        assert!(!retry);
    }

    #[test]
    fn good_status_and_recovered_errors_succeed_and_busy_is_retried() {
        assert!(judge(status(0), &[], "READ(10)").is_ok());
        let recovered = [0x70, 0, 0x01, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x18, 0];
        assert!(judge(status(0x02), &recovered, "READ(10)").is_ok());
        let (busy, retry) = judge(status(0x08), &[], "WRITE(10)").unwrap_err();
        assert_eq!(busy.cause, "WRITE(10): device busy");
        assert!(retry);
        let timed_out = Status {
            scsi: 0,
            host: 3,
            driver: 0,
        };
        let (error, _) = judge(timed_out, &[], "READ(16)").unwrap_err();
        assert_eq!(error.errno, Errno::TIMEDOUT);
        assert_eq!(error.cause, "READ(16): command timed out");
    }
}
