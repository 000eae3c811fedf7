//! The SOL_SOCKET options every socket has (Linux's sock_setsockopt and
//! sk_getsockopt for the generic `struct sock` fields): buffer sizes,
//! timeouts, reuse flags, linger, and the flags a family reads when it
//! sends or receives. Options whose answer is the family's (SO_ERROR,
//! SO_ACCEPTCONN, SO_PEERCRED...) are not here: [`SocketOptions::get`]
//! and [`SocketOptions::set`] answer None for them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use linux_raw_sys::net as n;

use crate::auth::{Creds, cap};
use crate::errno::Errno;

/// net.core.wmem_max and rmem_max: the most SO_SNDBUF and SO_RCVBUF set
/// without CAP_NET_ADMIN.
pub const WMEM_MAX: u32 = 212_992;
pub const RMEM_MAX: u32 = 212_992;
/// net.core.wmem_default and rmem_default.
pub const WMEM_DEFAULT: u32 = 212_992;
pub const RMEM_DEFAULT: u32 = 212_992;
/// The least a socket's buffers are set to (SOCK_MIN_SNDBUF, SOCK_MIN_RCVBUF).
const MIN_SNDBUF: u32 = 4_608;
const MIN_RCVBUF: u32 = 2_304;

/// SO_RCVTIMEO and SO_SNDTIMEO as the old and the y2038 numbers.
const SO_RCVTIMEO_OLD: u32 = 20;
const SO_SNDTIMEO_OLD: u32 = 21;
const SO_RCVTIMEO_NEW: u32 = 66;
const SO_SNDTIMEO_NEW: u32 = 67;
const SO_TIMESTAMP_OLD: u32 = 29;
const SO_TIMESTAMPNS_OLD: u32 = 35;
const SO_TIMESTAMP_NEW: u32 = 63;
const SO_TIMESTAMPNS_NEW: u32 = 64;

/// The generic options' values.
#[derive(Clone, Debug)]
pub struct Values {
    pub sndbuf: u32,
    pub rcvbuf: u32,
    /// Set by the application: a family that tunes its buffers leaves them.
    pub sndbuf_locked: bool,
    pub rcvbuf_locked: bool,
    pub rcvtimeo: Option<Duration>,
    pub sndtimeo: Option<Duration>,
    pub reuseaddr: bool,
    pub reuseport: bool,
    pub keepalive: bool,
    pub broadcast: bool,
    pub oobinline: bool,
    pub dontroute: bool,
    pub passcred: bool,
    pub passsec: bool,
    pub timestamp: bool,
    pub timestampns: bool,
    /// (l_onoff, l_linger).
    pub linger: (i32, i32),
    pub rcvlowat: i32,
    pub priority: i32,
    pub mark: u32,
    /// SO_PEEK_OFF: -1 off, else where the next MSG_PEEK reads from.
    pub peek_off: i32,
    pub bound_device: Vec<u8>,
    pub zerocopy: bool,
    pub busy_poll: i32,
}

/// A socket's generic options.
pub struct SocketOptions {
    values: Mutex<Values>,
    cookie: u64,
}

static NEXT_COOKIE: AtomicU64 = AtomicU64::new(1);

fn int_of(value: &[u8]) -> Result<i32, Errno> {
    let b: [u8; 4] = value.get(..4).ok_or(Errno::EINVAL)?.try_into().expect("four bytes");
    Ok(i32::from_ne_bytes(b))
}

fn int_bytes(v: i32) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

/// A buffer size set with SO_SNDBUF or SO_RCVBUF (`force`: the *FORCE
/// variant, past the sysctl's `max`, for CAP_NET_ADMIN): double what was
/// asked, as Linux keeps room for its bookkeeping, and at least `min`.
fn buffer_size(creds: &Creds, asked: i32, force: bool, max: u32, min: u32) -> Result<u32, Errno> {
    if force && !creds.has(cap::NET_ADMIN) {
        return Err(Errno::EPERM);
    }
    let limit = if force { i32::MAX as u32 / 2 } else { max };
    Ok(((asked.max(0) as u32).min(limit) * 2).max(min))
}

/// A timeval of SO_RCVTIMEO or SO_SNDTIMEO (both layouts are two 64-bit
/// fields on x86_64): None for no timeout.
fn timeout_of(value: &[u8]) -> Result<Option<Duration>, Errno> {
    if value.len() < 16 {
        return Err(Errno::EINVAL);
    }
    let sec = i64::from_ne_bytes(value[..8].try_into().expect("eight bytes"));
    let usec = i64::from_ne_bytes(value[8..16].try_into().expect("eight bytes"));
    if !(0..1_000_000).contains(&usec) {
        return Err(Errno::EDOM);
    }
    // Linux keeps a negative time, like zero, as no timeout.
    if sec < 0 || (sec == 0 && usec == 0) {
        return Ok(None);
    }
    Ok(Some(Duration::new(sec as u64, usec as u32 * 1000)))
}

fn timeout_bytes(t: Option<Duration>) -> Vec<u8> {
    let (sec, usec) = t.map_or((0, 0), |d| (d.as_secs() as i64, d.subsec_micros() as i64));
    let mut b = sec.to_ne_bytes().to_vec();
    b.extend_from_slice(&usec.to_ne_bytes());
    b
}

impl SocketOptions {
    /// Options of a new socket whose buffers start at `sndbuf` and
    /// `rcvbuf` bytes.
    pub fn new(sndbuf: u32, rcvbuf: u32) -> Self {
        SocketOptions {
            values: Mutex::new(Values {
                sndbuf,
                rcvbuf,
                sndbuf_locked: false,
                rcvbuf_locked: false,
                rcvtimeo: None,
                sndtimeo: None,
                reuseaddr: false,
                reuseport: false,
                keepalive: false,
                broadcast: false,
                oobinline: false,
                dontroute: false,
                passcred: false,
                passsec: false,
                timestamp: false,
                timestampns: false,
                linger: (0, 0),
                rcvlowat: 1,
                priority: 0,
                mark: 0,
                peek_off: -1,
                bound_device: Vec::new(),
                zerocopy: false,
                busy_poll: 0,
            }),
            cookie: NEXT_COOKIE.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// A copy of the values.
    pub fn values(&self) -> Values {
        self.values.lock().unwrap().clone()
    }

    /// Changes the values under the lock (what a family sets itself, such
    /// as the peek offset moving).
    pub fn update<R>(&self, f: impl FnOnce(&mut Values) -> R) -> R {
        f(&mut self.values.lock().unwrap())
    }

    /// Options inherited by an accepted socket from its listener (Linux's
    /// sk_clone_lock copies the whole sock).
    pub fn inherit(&self) -> SocketOptions {
        SocketOptions { values: Mutex::new(self.values()), cookie: NEXT_COOKIE.fetch_add(1, Ordering::Relaxed) }
    }

    /// When a blocking receive started now gives up (SO_RCVTIMEO).
    pub fn recv_deadline(&self) -> Option<Instant> {
        self.values.lock().unwrap().rcvtimeo.map(|d| Instant::now() + d)
    }

    /// When a blocking send started now gives up (SO_SNDTIMEO).
    pub fn send_deadline(&self) -> Option<Instant> {
        self.values.lock().unwrap().sndtimeo.map(|d| Instant::now() + d)
    }

    /// The generic option `name`'s value, or None if it is the family's.
    pub fn get(&self, name: u32) -> Option<Result<Vec<u8>, Errno>> {
        let v = self.values.lock().unwrap();
        let flag = |b: bool| Some(Ok(int_bytes(b as i32)));
        match name {
            n::SO_SNDBUF => Some(Ok(int_bytes(v.sndbuf as i32))),
            n::SO_RCVBUF => Some(Ok(int_bytes(v.rcvbuf as i32))),
            SO_RCVTIMEO_OLD | SO_RCVTIMEO_NEW => Some(Ok(timeout_bytes(v.rcvtimeo))),
            SO_SNDTIMEO_OLD | SO_SNDTIMEO_NEW => Some(Ok(timeout_bytes(v.sndtimeo))),
            n::SO_REUSEADDR => flag(v.reuseaddr),
            n::SO_REUSEPORT => flag(v.reuseport),
            n::SO_KEEPALIVE => flag(v.keepalive),
            n::SO_BROADCAST => flag(v.broadcast),
            n::SO_OOBINLINE => flag(v.oobinline),
            n::SO_DONTROUTE => flag(v.dontroute),
            n::SO_PASSCRED => flag(v.passcred),
            n::SO_PASSSEC => flag(v.passsec),
            SO_TIMESTAMP_OLD | SO_TIMESTAMP_NEW => flag(v.timestamp),
            SO_TIMESTAMPNS_OLD | SO_TIMESTAMPNS_NEW => flag(v.timestampns),
            n::SO_ZEROCOPY => flag(v.zerocopy),
            n::SO_LINGER => {
                let mut b = int_bytes(v.linger.0);
                b.extend_from_slice(&v.linger.1.to_ne_bytes());
                Some(Ok(b))
            }
            n::SO_RCVLOWAT => Some(Ok(int_bytes(v.rcvlowat))),
            n::SO_SNDLOWAT => Some(Ok(int_bytes(1))),
            n::SO_PRIORITY => Some(Ok(int_bytes(v.priority))),
            n::SO_MARK => Some(Ok(int_bytes(v.mark as i32))),
            n::SO_PEEK_OFF => Some(Ok(int_bytes(v.peek_off))),
            n::SO_BUSY_POLL => Some(Ok(int_bytes(v.busy_poll))),
            n::SO_INCOMING_CPU => Some(Ok(int_bytes(-1))),
            n::SO_COOKIE => Some(Ok(self.cookie.to_ne_bytes().to_vec())),
            n::SO_BINDTODEVICE => {
                let mut name = v.bound_device.clone();
                if !name.is_empty() {
                    name.push(0);
                }
                Some(Ok(name))
            }
            _ => None,
        }
    }

    /// Sets the generic option `name` as `creds` may, or None if it is the
    /// family's.
    pub fn set(&self, creds: &Creds, name: u32, value: &[u8]) -> Option<Result<(), Errno>> {
        let mut v = self.values.lock().unwrap();
        // Every option below but the timeouts, linger and the device takes
        // an int.
        let int = || int_of(value);
        let set_flag = |f: &mut bool| int().map(|i| *f = i != 0);
        let r = match name {
            n::SO_SNDBUF | n::SO_SNDBUFFORCE => int().and_then(|i| {
                let force = name == n::SO_SNDBUFFORCE;
                v.sndbuf = buffer_size(creds, i, force, WMEM_MAX, MIN_SNDBUF)?;
                v.sndbuf_locked = true;
                Ok(())
            }),
            n::SO_RCVBUF | n::SO_RCVBUFFORCE => int().and_then(|i| {
                let force = name == n::SO_RCVBUFFORCE;
                v.rcvbuf = buffer_size(creds, i, force, RMEM_MAX, MIN_RCVBUF)?;
                v.rcvbuf_locked = true;
                Ok(())
            }),
            SO_RCVTIMEO_OLD | SO_RCVTIMEO_NEW => timeout_of(value).map(|t| v.rcvtimeo = t),
            SO_SNDTIMEO_OLD | SO_SNDTIMEO_NEW => timeout_of(value).map(|t| v.sndtimeo = t),
            n::SO_REUSEADDR => set_flag(&mut v.reuseaddr),
            n::SO_REUSEPORT => set_flag(&mut v.reuseport),
            n::SO_KEEPALIVE => set_flag(&mut v.keepalive),
            n::SO_BROADCAST => set_flag(&mut v.broadcast),
            n::SO_OOBINLINE => set_flag(&mut v.oobinline),
            n::SO_DONTROUTE => set_flag(&mut v.dontroute),
            n::SO_PASSCRED => set_flag(&mut v.passcred),
            n::SO_PASSSEC => set_flag(&mut v.passsec),
            SO_TIMESTAMP_OLD | SO_TIMESTAMP_NEW => set_flag(&mut v.timestamp),
            SO_TIMESTAMPNS_OLD | SO_TIMESTAMPNS_NEW => set_flag(&mut v.timestampns),
            n::SO_ZEROCOPY => set_flag(&mut v.zerocopy),
            n::SO_LINGER => {
                if value.len() < 8 {
                    Err(Errno::EINVAL)
                } else {
                    let on = int_of(&value[..4]).expect("four bytes");
                    let secs = int_of(&value[4..8]).expect("four bytes");
                    v.linger = (on, secs);
                    Ok(())
                }
            }
            // As Linux: 0 means 1.
            n::SO_RCVLOWAT => int().map(|i| v.rcvlowat = if i <= 0 { 1 } else { i }),
            // Linux refuses to set a send low-water mark.
            n::SO_SNDLOWAT => int().and(Err(Errno::ENOPROTOOPT)),
            n::SO_PRIORITY => int().and_then(|i| {
                if (0..=6).contains(&i) || creds.has(cap::NET_ADMIN) {
                    v.priority = i;
                    Ok(())
                } else {
                    Err(Errno::EPERM)
                }
            }),
            n::SO_MARK => int().and_then(|i| {
                if creds.has(cap::NET_ADMIN) {
                    v.mark = i as u32;
                    Ok(())
                } else {
                    Err(Errno::EPERM)
                }
            }),
            n::SO_BUSY_POLL => int().and_then(|i| {
                if i < 0 {
                    Err(Errno::EINVAL)
                } else {
                    v.busy_poll = i;
                    Ok(())
                }
            }),
            n::SO_BINDTODEVICE => {
                if !creds.has(cap::NET_RAW) {
                    Err(Errno::EPERM)
                } else {
                    let name: Vec<u8> = value.iter().take_while(|b| **b != 0).copied().collect();
                    if name.len() >= 16 {
                        Err(Errno::EINVAL)
                    } else if !name.is_empty() && name != b"lo" {
                        Err(Errno::ENODEV)
                    } else {
                        v.bound_device = name;
                        Ok(())
                    }
                }
            }
            _ => return None,
        };
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> Creds {
        Creds::new(0, 0, Vec::new())
    }

    #[test]
    fn buffers_double_within_limits() {
        let o = SocketOptions::new(WMEM_DEFAULT, RMEM_DEFAULT);
        let c = root();
        o.set(&c, n::SO_SNDBUF, &1000i32.to_ne_bytes()).unwrap().unwrap();
        assert_eq!(o.get(n::SO_SNDBUF).unwrap().unwrap(), 4608i32.to_ne_bytes());
        o.set(&c, n::SO_RCVBUF, &(1i32 << 30).to_ne_bytes()).unwrap().unwrap();
        assert_eq!(o.get(n::SO_RCVBUF).unwrap().unwrap(), (2 * RMEM_MAX as i32).to_ne_bytes());
        assert!(matches!(o.set(&c, n::SO_SNDBUF, &[1, 2]), Some(Err(Errno::EINVAL))));
    }

    #[test]
    fn timeouts_round_trip() {
        let o = SocketOptions::new(WMEM_DEFAULT, RMEM_DEFAULT);
        let mut tv = 2i64.to_ne_bytes().to_vec();
        tv.extend_from_slice(&500_000i64.to_ne_bytes());
        o.set(&root(), SO_RCVTIMEO_OLD, &tv).unwrap().unwrap();
        assert_eq!(o.get(SO_RCVTIMEO_OLD).unwrap().unwrap(), tv);
        assert_eq!(o.values().rcvtimeo, Some(Duration::from_millis(2500)));
        let mut bad = 0i64.to_ne_bytes().to_vec();
        bad.extend_from_slice(&1_000_000i64.to_ne_bytes());
        assert!(matches!(o.set(&root(), SO_RCVTIMEO_OLD, &bad), Some(Err(Errno::EDOM))));
    }

    #[test]
    fn family_options_are_not_generic() {
        let o = SocketOptions::new(WMEM_DEFAULT, RMEM_DEFAULT);
        assert!(o.get(n::SO_ERROR).is_none());
        assert!(o.set(&root(), n::SO_ACCEPTCONN, &1i32.to_ne_bytes()).is_none());
    }
}
