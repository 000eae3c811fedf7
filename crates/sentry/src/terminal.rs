//! The caller's terminal wired to a sandbox pty (`cordon run -t`): a host
//! thread copies what the caller types into the pty's master and what the
//! sandbox writes to its terminal out to the caller, and the caller's
//! window size follows into the pty.
//!
//! The thread never blocks inside the sandbox's objects: it offers input
//! and takes output without waiting, and sleeps in one host poll on the
//! caller's terminal, a waiter of the pty's queue and its stop signal.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use rustix::event::{PollFd, PollFlags, poll};

use crate::task::Waiter;
use crate::tty::MasterFile;

/// Bytes read from the caller's terminal at a time.
const CHUNK: usize = 4096;

/// The relay's host thread.
pub struct TerminalRelay {
    stop: OwnedFd,
    handle: std::thread::JoinHandle<()>,
}

impl TerminalRelay {
    /// Starts copying: `input` (the caller's terminal, with `-i`) into the
    /// pty, the pty's output to `output`.
    pub fn start(master: Arc<MasterFile>, input: Option<OwnedFd>, output: OwnedFd) -> TerminalRelay {
        use rustix::event::{EventfdFlags, eventfd};
        let stop = eventfd(0, EventfdFlags::CLOEXEC).expect("eventfd");
        let stop_wait = stop.try_clone().expect("dup eventfd");
        let handle = std::thread::Builder::new()
            .name("terminal".into())
            .spawn(move || relay(master, input, output, stop_wait))
            .expect("spawn the terminal relay");
        TerminalRelay { stop, handle }
    }

    /// Stops the relay once it has written out everything the sandbox
    /// wrote; the master closes with it.
    pub fn finish(self) {
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
        let _ = self.handle.join();
    }
}

fn relay(master: Arc<MasterFile>, mut input: Option<OwnedFd>, output: OwnedFd, stop: OwnedFd) {
    let pty = master.pty().clone();
    let waiter = Waiter::new();
    // Made before registering, so that no wake goes unseen by the poll.
    let _ = waiter.eventfd();
    let _registered = pty.queue().register(&waiter);
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let out = pty.take_output();
        if !out.is_empty() {
            write_all(&output, &out);
            continue;
        }
        if !pending.is_empty() {
            let n = pty.offer_input(&pending);
            pending.drain(..n);
        }
        let reading = pending.is_empty() && input.is_some();
        let (stopped, woken, readable) = {
            let ev = waiter.eventfd();
            let mut fds = vec![PollFd::new(&stop, PollFlags::IN), PollFd::new(&ev, PollFlags::IN)];
            if reading && let Some(i) = &input {
                fds.push(PollFd::new(i, PollFlags::IN));
            }
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty(), fds.get(2).map(|f| f.revents()))
        };
        if stopped {
            break;
        }
        if woken {
            waiter.drain_eventfd();
        }
        if let (Some(revents), Some(fd)) = (readable, &input)
            && !revents.is_empty()
        {
            let mut buf = vec![0u8; CHUNK];
            match rustix::io::read(fd, &mut buf) {
                Ok(0) => input = None,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                // The caller's terminal is gone: no more input.
                Err(_) => input = None,
            }
        }
    }
    write_all(&output, &pty.take_output());
}

/// Writes everything to the caller's terminal, waiting while it is full;
/// output the caller can no longer take is dropped.
fn write_all(fd: &OwnedFd, mut data: &[u8]) {
    while !data.is_empty() {
        match rustix::io::write(fd, data) {
            Ok(0) => return,
            Ok(n) => data = &data[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                let mut fds = [PollFd::new(fd, PollFlags::OUT)];
                let _ = poll(&mut fds, None);
            }
            Err(_) => return,
        }
    }
}

/// The window size of the caller's terminal `fd`, if it is one.
pub fn window_size(fd: &OwnedFd) -> Option<linux_raw_sys::general::winsize> {
    let mut ws = <linux_raw_sys::general::winsize as crate::abi::Pod>::zeroed();
    // SAFETY: TIOCGWINSZ fills the winsize we own exclusively for the call.
    let r = unsafe {
        libc::ioctl(fd.as_fd().as_raw_fd(), libc::TIOCGWINSZ, &mut ws as *mut linux_raw_sys::general::winsize)
    };
    (r == 0).then_some(ws)
}
