//! Every file operation on a writable file system, one C program per family
//! (tests/c/fs_*.c), each working in a fresh directory: natively under the
//! host's temporary directory, in the sandbox under its /tmp. Both runs must
//! pass and print the same, so every expectation, errno cases included, is
//! Linux's own.

mod common;

macro_rules! work_dir_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                require_kvm!();
                common::c_test_in_work_dir(stringify!($name));
            }
        )*
    };
}

work_dir_tests! {
    fs_open,
    fs_names,
    fs_attrs,
    fs_xattr,
    fs_data,
    fs_perms,
    fs_fifo,
}
