//! Shell scripts run by dash (/bin/sh) and bash, natively and in the
//! sandbox: stdout and exit status must be the same. They exercise what a
//! shell does with processes: pipelines, command substitution, subshells,
//! background jobs and wait, traps, kill, exit statuses, many forks.

mod common;

use common::{assert_same_shell_status, native, sandbox};

const SHELLS: [&str; 2] = ["/bin/sh", "/bin/bash"];

/// Runs `script` with `shell -c` both ways and compares (a shell killed
/// by signal N natively must make cordon exit with 128 + N).
fn same_in(shell: &str, what: &str, script: &str) {
    let n = native(shell, &["-c", script], None);
    let s = sandbox(&[], shell, &["-c", script], None);
    assert_same_shell_status(&format!("{shell}: {what}"), &s, &n);
}

/// The same script under dash and bash.
fn same(what: &str, script: &str) {
    for sh in SHELLS {
        same_in(sh, what, script);
    }
}

#[test]
fn pipelines_of_three_stages() {
    require_kvm!();
    same("three stages", "seq 1 200 | grep 7 | wc -l");
    same("sort and count", "printf 'b\\na\\nc\\na\\nb\\na\\n' | sort | uniq -c | sort -rn");
    same("status of the last stage", "false | true | false; echo $?; true | false | true; echo $?");
    // Data larger than a pipe's capacity through every stage.
    same("large data", "seq 1 50000 | tr 0-9 a-j | cksum");
}

#[test]
fn command_substitution() {
    require_kvm!();
    same("simple", "x=$(echo hello | tr a-z A-Z); echo \"[$x]\"");
    same("nested", "echo $(echo outer $(echo inner $(echo innermost)))");
    same("status", "x=$(exit 7); echo $?; y=$(false || echo rescued); echo $y");
    same("in a loop", "n=0; for i in 1 2 3 4 5 6 7 8 9 10; do n=$(( n + $(echo $i) )); done; echo $n");
    same("trailing newlines stripped", "x=$(printf 'a\\n\\n\\n'); echo \"<$x>\"");
}

#[test]
fn subshells() {
    require_kvm!();
    same("cwd and variables stay inside", "cd /; (cd /usr && pwd; v=in); pwd; echo \"v=$v\"");
    same("exit status", "(exit 3); echo $?; (false); echo $?; ( (exit 4) ); echo $?");
    same("grouped output into a pipe", "(echo one; echo two; (echo three)) | wc -l");
    same("exit in a subshell does not end the shell", "(exit 1); echo still here");
}

#[test]
fn background_jobs_and_wait() {
    require_kvm!();
    same("wait for each", "(sleep 0.2; exit 5) & a=$!; (exit 6) & b=$!; wait $b; echo $?; wait $a; echo $?");
    // The jobs end in any order; wait must see them all end before the
    // last line. Their lines are sorted, the last kept last: a job that
    // outlived wait would print after it.
    same(
        "wait for all",
        "{ for i in 1 2 3 4; do (sleep 0.$i; echo job $i) & done; wait; echo all done; } \
         | awk '/^job/ { print | \"sort\"; next } { close(\"sort\"); print }'",
    );
    same(
        "each job's status, whatever order they end in",
        "for i in 1 2 3; do (sleep 0.$i; exit $i) & eval p$i=\\$!; done; \
         wait $p3; echo $?; wait $p1; echo $?; wait $p2; echo $?",
    );
    same("output order through wait", "(echo first) & wait; echo second");
    same("unknown job", "wait 999999 2>/dev/null; echo $?");
}

#[test]
fn traps() {
    require_kvm!();
    same("INT", "trap 'echo got INT' INT; kill -INT $$; echo after");
    same("TERM", "trap 'echo got TERM' TERM; kill -TERM $$; echo after");
    same("EXIT", "trap 'echo leaving' EXIT; echo body");
    same("EXIT with status", "trap 'echo leaving $?' EXIT; (exit 3); exit 9");
    same("trap that exits", "trap 'echo term; exit 7' TERM; kill -TERM $$; echo not reached");
    same("reset to default", "trap 'echo caught' USR1; kill -USR1 $$; trap - USR1; kill -USR1 $$; echo not reached");
    same("ignored", "trap '' TERM; kill -TERM $$; echo survived");
    // A trap runs once the foreground child ends.
    same("during a child", "trap 'echo got USR1' USR1; (sleep 0.2; kill -USR1 $$) & sleep 0.5; wait; echo end");
}

#[test]
fn kill_background_job() {
    require_kvm!();
    same("TERM", "sleep 10 & p=$!; kill -TERM $p; wait $p; echo $?");
    same("KILL", "sleep 10 & p=$!; kill -KILL $p; wait $p; echo $?");
    // Killed only once its trap is in place (SIGTERM in its SigCgt).
    same(
        "a job that traps TERM",
        "sh -c 'trap \"exit 42\" TERM; while :; do sleep 0.05; done' & p=$!; \
         i=0; until c=$(awk '/^SigCgt/ {print $2}' /proc/$p/status) && [ $(( 0x$c & 0x4000 )) -ne 0 ] \
         || [ $i -ge 1000 ]; do i=$((i+1)); sleep 0.01; done; \
         kill $p; wait $p; echo $?",
    );
    same(
        "kill 0 checks existence",
        "sleep 0.3 & p=$!; kill -0 $p && echo alive; wait $p; kill -0 $p 2>/dev/null || echo gone",
    );
}

#[test]
fn exit_statuses_with_set_e_and_or() {
    require_kvm!();
    same("|| recovers", "set -e; false || echo recovered; echo went on");
    same("set -e stops", "set -e; echo before; false; echo not reached");
    same("set -e in a subshell", "set -e; (false; echo not reached); echo not reached either");
    same("&& chains", "true && echo a && false && echo b || echo c");
    same("if and !", "if ! false; then echo negated; fi; ! true; echo $?");
    same("exit codes", "sh -c 'exit 200'; echo $?; sh -c 'kill -9 $$'; echo $?");
    same("signal status", "sh -c 'kill -TERM $$'; echo $?");
}

#[test]
fn a_loop_forking_200_children() {
    require_kvm!();
    same("200 forks of /bin/true", "i=0; while [ $i -lt 200 ]; do /bin/true || exit 1; i=$((i+1)); done; echo $i");
    same("200 subshells", "i=0; n=0; while [ $i -lt 200 ]; do n=$(( n + $(echo 1) )); i=$((i+1)); done; echo $n");
}

#[test]
fn xargs_in_parallel() {
    require_kvm!();
    same("xargs -P2", "seq 1 20 | xargs -P2 -n1 sh -c 'echo $(($1 * $1))' _ | sort -n | tr '\\n' ' '");
    same("xargs -P2 statuses", "seq 1 6 | xargs -P2 -n1 sh -c 'test $1 -ne 4'  _; echo $?");
}

#[test]
fn find_conf_files_at_depth_two() {
    require_kvm!();
    // /dev, /proc and /sys are the sentry's own and /tmp will be (design),
    // so they are left out of the comparison; the rest of / is the host's.
    same(
        "find",
        "find / -maxdepth 2 -name '*.conf' -not -path '/proc/*' -not -path '/dev/*' -not -path '/sys/*' \
         -not -path '/tmp/*' 2>/dev/null | sort | head",
    );
}

/// bash's `<(...)` and `>(...)` hand a command /dev/fd/N, which must open
/// the same pipe again.
#[test]
fn process_substitution() {
    require_kvm!();
    same_in("/bin/bash", "read from <(...)", "cat <(echo x; echo y)");
    same_in("/bin/bash", "two at once", "diff <(printf 'a\\nb\\n') <(printf 'a\\nc\\n'); echo $?");
    same_in("/bin/bash", "write to >(...)", "echo hello > >(tr a-z A-Z); wait");
    same_in("/bin/bash", "through /proc", "exec 3< <(echo via-proc); cat /proc/self/fd/3");
}
