//! A process's credentials and the rules for changing them.
//!
//! The sandbox starts with the caller's identity. A process whose effective
//! user id is 0 may take any identity, as root can on Linux; any other may
//! only move between the ids it already holds (setuid(2), setreuid(2),
//! setresuid(2) and their group forms).

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

/// A process's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creds {
    pub uid: Ids,
    pub gid: Ids,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Creds {
    /// The host process's own identity (the sandbox's first one).
    pub fn of_host() -> Creds {
        static HOST: std::sync::OnceLock<Creds> = std::sync::OnceLock::new();
        HOST.get_or_init(Self::read_host).clone()
    }

    fn read_host() -> Creds {
        Creds {
            uid: Ids {
                real: rustix::process::getuid().as_raw(),
                effective: rustix::process::geteuid().as_raw(),
                saved: rustix::process::geteuid().as_raw(),
                fs: rustix::process::geteuid().as_raw(),
            },
            gid: Ids {
                real: rustix::process::getgid().as_raw(),
                effective: rustix::process::getegid().as_raw(),
                saved: rustix::process::getegid().as_raw(),
                fs: rustix::process::getegid().as_raw(),
            },
            groups: rustix::process::getgroups().unwrap_or_default().iter().map(|g| g.as_raw()).collect(),
        }
    }

    /// May change user ids at will (CAP_SETUID).
    pub fn may_set_uid(&self) -> bool {
        self.uid.effective == 0
    }

    /// May change group ids at will (CAP_SETGID).
    pub fn may_set_gid(&self) -> bool {
        self.uid.effective == 0
    }

    /// May go past resource limits, such as raising a hard one
    /// (CAP_SYS_RESOURCE): root, when the caller of the sandbox holds that
    /// capability itself, since the sandbox grants nothing its caller
    /// lacks.
    pub fn may_exceed_limits(&self) -> bool {
        static HOST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        self.uid.effective == 0
            && *HOST.get_or_init(|| {
                rustix::thread::capabilities(None)
                    .is_ok_and(|c| c.effective.contains(rustix::thread::CapabilitySet::SYS_RESOURCE))
            })
    }
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
}
