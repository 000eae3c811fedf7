//! A process's credentials and the rules for changing them.
//!
//! The sandbox starts with the caller's identity, captured once at start-up.
//! Capabilities follow Linux's rules for a process without user namespaces
//! or file capabilities: uid 0 holds them, leaving uid 0 drops them unless
//! PR_SET_KEEPCAPS says otherwise, and every permission check asks the
//! calling process's credentials, never the host. A process with
//! CAP_SETUID may take any identity; any other may only move between the
//! ids it already holds (setuid(2), setreuid(2), setresuid(2) and their
//! group forms).

use crate::errno::Errno;

/// "Leave this id as it is" in the set*id calls.
const KEEP: u32 = u32::MAX;

/// Real, effective, saved and file-system ids of one kind (user or group).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ids {
    pub real: u32,
    pub effective: u32,
    pub saved: u32,
    pub fs: u32,
}

impl Ids {
    pub fn all(id: u32) -> Ids {
        Ids { real: id, effective: id, saved: id, fs: id }
    }

    fn holds(&self, id: u32) -> bool {
        id == self.real || id == self.effective || id == self.saved
    }

    /// setuid(2): privileged, every id; otherwise the effective one, to the
    /// real or saved id.
    pub fn set(&mut self, id: u32, privileged: bool) -> Result<(), Errno> {
        if privileged {
            *self = Ids::all(id);
        } else if id == self.real || id == self.saved {
            self.effective = id;
            self.fs = id;
        } else {
            return Err(Errno::EPERM);
        }
        Ok(())
    }

    /// setreuid(2).
    pub fn set_re(&mut self, real: u32, effective: u32, privileged: bool) -> Result<(), Errno> {
        if !privileged
            && ((real != KEEP && real != self.real && real != self.effective)
                || (effective != KEEP && !self.holds(effective)))
        {
            return Err(Errno::EPERM);
        }
        let old_real = self.real;
        if real != KEEP {
            self.real = real;
        }
        if effective != KEEP {
            self.effective = effective;
        }
        // The saved id follows the effective one when the real id was set,
        // or the effective id was set to something other than the old real.
        if real != KEEP || (effective != KEEP && effective != old_real) {
            self.saved = self.effective;
        }
        self.fs = self.effective;
        Ok(())
    }

    /// setresuid(2).
    pub fn set_res(&mut self, real: u32, effective: u32, saved: u32, privileged: bool) -> Result<(), Errno> {
        if !privileged && [real, effective, saved].iter().any(|&id| id != KEEP && !self.holds(id)) {
            return Err(Errno::EPERM);
        }
        if real != KEEP {
            self.real = real;
        }
        if effective != KEEP {
            self.effective = effective;
        }
        if saved != KEEP {
            self.saved = saved;
        }
        self.fs = self.effective;
        Ok(())
    }

    /// setfsuid(2): returns the old fs id whether or not it changed.
    pub fn set_fs(&mut self, id: u32, privileged: bool) -> u32 {
        let old = self.fs;
        if id != KEEP && (privileged || self.holds(id) || id == self.fs) {
            self.fs = id;
        }
        old
    }
}

/// Capability numbers (linux/capability.h) the sentry checks.
pub mod cap {
    pub const CHOWN: u32 = 0;
    pub const DAC_OVERRIDE: u32 = 1;
    pub const DAC_READ_SEARCH: u32 = 2;
    pub const FOWNER: u32 = 3;
    pub const FSETID: u32 = 4;
    pub const KILL: u32 = 5;
    pub const SETGID: u32 = 6;
    pub const SETUID: u32 = 7;
    pub const SETPCAP: u32 = 8;
    pub const LINUX_IMMUTABLE: u32 = 9;
    pub const NET_BIND_SERVICE: u32 = 10;
    pub const NET_BROADCAST: u32 = 11;
    pub const NET_ADMIN: u32 = 12;
    pub const NET_RAW: u32 = 13;
    pub const SYS_CHROOT: u32 = 18;
    pub const SYS_ADMIN: u32 = 21;
    pub const SYS_NICE: u32 = 23;
    pub const SYS_RESOURCE: u32 = 24;
    pub const MKNOD: u32 = 27;
    pub const MAC_OVERRIDE: u32 = 32;
    /// The highest capability Linux knows (CAP_CHECKPOINT_RESTORE).
    pub const LAST: u32 = 40;
}

/// A set of capabilities, one bit per capability number.
pub type CapSet = u64;

/// Every capability.
/// Most supplementary groups a process may have (NGROUPS_MAX).
pub const NGROUPS_MAX: u64 = 65536;

pub const ALL_CAPS: CapSet = (1 << (cap::LAST + 1)) - 1;

const fn bit(c: u32) -> CapSet {
    1 << c
}

/// The capabilities that follow the file-system user id (Linux's
/// CAP_FS_SET): dropped when it leaves 0, raised from the permitted set
/// when it returns.
const FS_CAPS: CapSet = bit(cap::CHOWN)
    | bit(cap::DAC_OVERRIDE)
    | bit(cap::DAC_READ_SEARCH)
    | bit(cap::FOWNER)
    | bit(cap::FSETID)
    | bit(cap::LINUX_IMMUTABLE)
    | bit(cap::MKNOD)
    | bit(cap::MAC_OVERRIDE);

/// A process's capability sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Caps {
    pub effective: CapSet,
    pub permitted: CapSet,
    pub inheritable: CapSet,
    /// What execve may grant at most (PR_CAPBSET_READ/DROP).
    pub bounding: CapSet,
    pub ambient: CapSet,
}

impl Caps {
    /// What a process of `euid` holds where user namespaces play no part:
    /// root everything, anyone else nothing.
    pub fn for_euid(euid: u32) -> Caps {
        let all = if euid == 0 { ALL_CAPS } else { 0 };
        Caps { effective: all, permitted: all, inheritable: 0, bounding: ALL_CAPS, ambient: 0 }
    }
}

/// A process's identity: its ids and the capabilities that go with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creds {
    pub uid: Ids,
    pub gid: Ids,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    pub caps: Caps,
    /// PR_SET_KEEPCAPS: leaving uid 0 keeps the permitted set.
    pub keep_caps: bool,
}

impl Creds {
    /// The identity of the calling host process: the sandbox's first one.
    /// Asked once, at start-up, before cordon gives up its host identity.
    pub fn of_host() -> Creds {
        use rustix::process::{getegid, geteuid, getgid, getuid};
        let euid = geteuid().as_raw();
        let egid = getegid().as_raw();
        let mut caps = Caps::for_euid(euid);
        if let Ok(c) = rustix::thread::capabilities(None) {
            caps.effective = c.effective.bits();
            caps.permitted = c.permitted.bits();
            caps.inheritable = c.inheritable.bits();
        }
        caps.bounding = (0..=cap::LAST).filter(|&c| host_bounding_has(c)).fold(0, |set, c| set | bit(c));
        Creds {
            uid: Ids { real: getuid().as_raw(), effective: euid, saved: euid, fs: euid },
            gid: Ids { real: getgid().as_raw(), effective: egid, saved: egid, fs: egid },
            groups: rustix::process::getgroups().unwrap_or_default().iter().map(|g| g.as_raw()).collect(),
            caps,
            keep_caps: false,
        }
    }

    /// An identity of `uid` and `gid` with the capabilities Linux gives it.
    pub fn new(uid: u32, gid: u32, groups: Vec<u32>) -> Creds {
        Creds { uid: Ids::all(uid), gid: Ids::all(gid), groups, caps: Caps::for_euid(uid), keep_caps: false }
    }

    /// True if the effective set holds capability `c` (capable()).
    pub fn has(&self, c: u32) -> bool {
        self.caps.effective & bit(c) != 0
    }

    /// True if `gid` is the file-system group or a supplementary one
    /// (in_group_p()).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid.fs == gid || self.groups.contains(&gid)
    }

    /// May change user ids at will (CAP_SETUID).
    pub fn may_set_uid(&self) -> bool {
        self.has(cap::SETUID)
    }

    /// May change group ids and the supplementary groups at will
    /// (CAP_SETGID).
    pub fn may_set_gid(&self) -> bool {
        self.has(cap::SETGID)
    }

    /// May go past resource limits, such as raising a hard one
    /// (CAP_SYS_RESOURCE).
    pub fn may_exceed_limits(&self) -> bool {
        self.has(cap::SYS_RESOURCE)
    }

    /// The identity access(2) checks with, unless AT_EACCESS: the real ids,
    /// and for a real uid other than 0 no capabilities at all
    /// (access_override_creds()).
    pub fn for_access(&self) -> Creds {
        let mut c = self.clone();
        c.uid.fs = c.uid.real;
        c.gid.fs = c.gid.real;
        c.caps.effective = if c.uid.real == 0 { c.caps.permitted } else { 0 };
        c
    }

    /// Adjusts the capabilities after setuid, setreuid or setresuid
    /// changed the user ids from `old`, as Linux's cap_emulate_setxuid()
    /// does: leaving uid 0 altogether drops the permitted set (unless
    /// PR_SET_KEEPCAPS) and the ambient one; the effective set follows the
    /// effective uid out of and back into 0.
    pub fn fix_caps_after_setuid(&mut self, old: &Ids) {
        let had_root = old.real == 0 || old.effective == 0 || old.saved == 0;
        let has_root = self.uid.real == 0 || self.uid.effective == 0 || self.uid.saved == 0;
        if had_root && !has_root {
            if !self.keep_caps {
                self.caps.permitted = 0;
                self.caps.effective = 0;
            }
            self.caps.ambient = 0;
        }
        if old.effective == 0 && self.uid.effective != 0 {
            self.caps.effective = 0;
        }
        if old.effective != 0 && self.uid.effective == 0 {
            self.caps.effective = self.caps.permitted;
        }
    }

    /// The file-system capabilities follow the file-system uid in and out
    /// of 0.
    pub fn fix_caps_after_setfsuid(&mut self, old_fs: u32) {
        if old_fs == 0 && self.uid.fs != 0 {
            self.caps.effective &= !FS_CAPS;
        } else if old_fs != 0 && self.uid.fs == 0 {
            self.caps.effective |= self.caps.permitted & FS_CAPS;
        }
    }

    /// The capabilities a new program gets (no file capabilities, no
    /// set-user-id bits), as Linux's cap_bprm_creds_from_file(): a real or
    /// effective uid 0 counts as a file allowing everything, so the
    /// permitted set is the bounding and inheritable sets; anyone else
    /// keeps only the ambient set. All that is permitted is effective for
    /// an effective uid 0, else only the ambient set.
    pub fn exec(&mut self) {
        let c = &mut self.caps;
        c.permitted = if self.uid.real == 0 || self.uid.effective == 0 {
            c.bounding | c.inheritable | c.ambient
        } else {
            c.ambient
        };
        c.effective = if self.uid.effective == 0 { c.permitted } else { c.ambient };
        self.keep_caps = false;
    }

    /// capset(2) for the caller's own sets.
    pub fn set_caps(&mut self, effective: CapSet, permitted: CapSet, inheritable: CapSet) -> Result<(), Errno> {
        let c = &self.caps;
        let within = |a: CapSet, b: CapSet| a & !b == 0;
        if !self.has(cap::SETPCAP) && !within(inheritable, c.inheritable | c.permitted) {
            return Err(Errno::EPERM);
        }
        if !within(inheritable, c.inheritable | c.bounding) {
            return Err(Errno::EPERM);
        }
        if !within(permitted, c.permitted) || !within(effective, permitted) {
            return Err(Errno::EPERM);
        }
        let ambient = c.ambient & permitted & inheritable;
        self.caps = Caps { effective, permitted, inheritable, ambient, ..self.caps };
        Ok(())
    }
}

/// True if the host's bounding set holds capability `c`.
fn host_bounding_has(c: u32) -> bool {
    // SAFETY: PR_CAPBSET_READ only reads the calling thread's bounding set.
    unsafe { libc::prctl(libc::PR_CAPBSET_READ, c as libc::c_ulong, 0, 0, 0) == 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_may_become_anyone_and_then_not_back() {
        let mut u = Ids::all(0);
        u.set(1000, true).unwrap();
        assert_eq!(u, Ids::all(1000));
        assert_eq!(u.set(0, false), Err(Errno::EPERM));
    }

    #[test]
    fn unprivileged_moves_between_held_ids() {
        let mut u = Ids { real: 1000, effective: 1000, saved: 2000, fs: 1000 };
        u.set(2000, false).unwrap();
        assert_eq!((u.real, u.effective, u.saved, u.fs), (1000, 2000, 2000, 2000));
        assert_eq!(u.set(3000, false), Err(Errno::EPERM));
        u.set(1000, false).unwrap();
        assert_eq!(u.effective, 1000);
        assert_eq!(u.set(1000, false), Ok(()), "setting the id one has is allowed");
    }

    #[test]
    fn setreuid_swaps_and_updates_saved() {
        let mut u = Ids { real: 1000, effective: 2000, saved: 2000, fs: 2000 };
        u.set_re(2000, 1000, false).unwrap();
        assert_eq!((u.real, u.effective, u.saved), (2000, 1000, 1000));
        assert_eq!(u.set_re(3000, KEEP, false), Err(Errno::EPERM));
        let mut u = Ids { real: 1000, effective: 1000, saved: 2000, fs: 1000 };
        u.set_re(KEEP, 2000, false).unwrap();
        assert_eq!(u.saved, 2000, "effective set to other than the old real updates saved");
        assert_eq!(u.set_re(KEEP, KEEP, false), Ok(()));
    }

    #[test]
    fn setresuid_checks_each_id() {
        let mut u = Ids { real: 1, effective: 2, saved: 3, fs: 2 };
        u.set_res(3, 1, KEEP, false).unwrap();
        assert_eq!((u.real, u.effective, u.saved, u.fs), (3, 1, 3, 1));
        assert_eq!(u.set_res(KEEP, KEEP, 9, false), Err(Errno::EPERM));
        u.set_res(9, 9, 9, true).unwrap();
        assert_eq!(u, Ids::all(9));
    }

    #[test]
    fn setfsuid_reports_the_old_value() {
        let mut u = Ids { real: 1, effective: 2, saved: 3, fs: 2 };
        assert_eq!(u.set_fs(3, false), 2);
        assert_eq!(u.fs, 3);
        assert_eq!(u.set_fs(7, false), 3);
        assert_eq!(u.fs, 3, "refused quietly");
        assert_eq!(u.set_fs(KEEP, false), 3, "-1 only asks");
    }

    #[test]
    fn leaving_root_drops_capabilities_unless_kept() {
        let mut c = Creds::new(0, 0, Vec::new());
        let old = c.uid;
        c.uid.set(1000, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!((c.caps.effective, c.caps.permitted), (0, 0));

        let mut c = Creds::new(0, 0, Vec::new());
        c.keep_caps = true;
        let old = c.uid;
        c.uid.set(1000, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!((c.caps.effective, c.caps.permitted), (0, ALL_CAPS), "kept, not effective");
    }

    #[test]
    fn effective_caps_follow_the_effective_uid() {
        let mut c = Creds::new(0, 0, Vec::new());
        let old = c.uid;
        c.uid.set_re(KEEP, 1000, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!((c.caps.effective, c.caps.permitted), (0, ALL_CAPS));
        let old = c.uid;
        c.uid.set_re(KEEP, 0, false).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!(c.caps.effective, ALL_CAPS);
        let old_fs = c.uid.set_fs(1000, true);
        c.fix_caps_after_setfsuid(old_fs);
        assert!(!c.has(cap::DAC_OVERRIDE) && c.has(cap::KILL), "only the file-system set goes");
        // A setresuid that leaves the effective uid at 0 resets the
        // file-system uid but not the capabilities it took.
        let old = c.uid;
        c.uid.set_res(KEEP, 0, KEEP, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!(c.uid.fs, 0);
        assert!(!c.has(cap::DAC_OVERRIDE));
    }

    #[test]
    fn leaving_root_always_drops_the_ambient_set() {
        let mut c = Creds::new(0, 0, Vec::new());
        c.keep_caps = true;
        c.caps.inheritable = 1 << cap::KILL;
        c.caps.ambient = 1 << cap::KILL;
        let old = c.uid;
        c.uid.set(1000, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!(c.caps.ambient, 0);
        c.exec();
        assert_eq!((c.caps.permitted, c.caps.effective), (0, 0), "a non-root program keeps only ambient ones");
    }

    #[test]
    fn capset_never_widens() {
        let mut c = Creds::new(1000, 1000, Vec::new());
        assert_eq!(c.set_caps(1, 1, 0), Err(Errno::EPERM));
        let mut c = Creds::new(0, 0, Vec::new());
        c.set_caps(0, 1 << cap::KILL, 0).unwrap();
        assert_eq!(c.set_caps(1 << cap::CHOWN, 1 << cap::KILL, 0), Err(Errno::EPERM));
        assert_eq!(c.set_caps(0, ALL_CAPS, 0), Err(Errno::EPERM));
        c.exec();
        assert_eq!(c.caps.permitted, ALL_CAPS, "root's next program has the bounding set");
    }
}
