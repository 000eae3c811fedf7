"""Tests of bench/run's own logic: how a run's output becomes a number or a
reason, for every way a run can end. Fake "platforms" are shell snippets put
before the real command, so no sandbox is needed:

    /usr/bin/python3 bench/test_run.py
"""

import hashlib
import importlib.machinery
import importlib.util
import io
import json
import os
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

_path = str(Path(__file__).resolve().parent / "run")
_loader = importlib.machinery.SourceFileLoader("bench_run", _path)
_spec = importlib.util.spec_from_loader("bench_run", _loader)
run = importlib.util.module_from_spec(_spec)
sys.modules["bench_run"] = run  # dataclasses look their module up there
_loader.exec_module(run)

SETTINGS = run.Settings(quick=True, seconds=0.01)
GETPID = next(c for c in run.CASES if c.name == "getpid")
TRUE = next(c for c in run.CASES if c.name == "startup_true")


def fake(script: str, marker: str = "fake:") -> "run.Platform":
    """A platform that runs `script` with the real command as "$@"."""
    return run.Platform("fake", ["/bin/sh", "-c", script, "sh"], marker=marker)


def setUpModule():
    # Every class runs the C programs; build them before any class starts.
    run.build_c()


class RunOne(unittest.TestCase):
    def one(self, case, plat, timeout=30.0):
        return run.run_one(case, plat, SETTINGS, timeout, dict(os.environ))

    def test_native_micro_gives_a_number(self):
        o = self.one(GETPID, run.Platform("native", []))
        self.assertTrue(o.ok, o.reason)
        self.assertGreater(o.value_ns, 0)

    def test_native_spawn_gives_a_number(self):
        o = self.one(TRUE, run.Platform("native", []))
        self.assertTrue(o.ok, o.reason)
        self.assertGreater(o.value_ns, 0)

    def test_success_keeps_the_sandbox_messages(self):
        o = self.one(GETPID, fake('echo "fake: unsupported system call x" >&2; exec "$@"'))
        self.assertTrue(o.ok, o.reason)
        self.assertEqual(o.warnings, ["fake: unsupported system call x"])

    def test_failure_prefers_the_sandbox_line(self):
        o = self.one(GETPID, fake('echo "program: noise" >&2; echo "fake: unsupported system call fork (57)" >&2; exit 3'))
        self.assertFalse(o.ok)
        self.assertEqual(o.status, "unsupported")
        self.assertEqual(o.reason, "fake: unsupported system call fork (57) [exit status 3]")

    def test_failure_without_a_sandbox_line_gives_the_first_line(self):
        o = self.one(GETPID, fake('echo "first" >&2; echo "second" >&2; exit 1', marker=""))
        self.assertEqual((o.status, o.reason), ("unsupported", "first [exit status 1]"))

    def test_silent_failure_gives_the_exit_status(self):
        o = self.one(GETPID, fake("exit 0"))
        self.assertEqual((o.status, o.reason), ("unsupported", "no result line in the output [exit status 0]"))

    def test_spawn_failure_reports_the_inner_exit_status(self):
        o = self.one(TRUE, fake('echo "fake: no pipes" >&2; exit 2'))
        self.assertEqual((o.status, o.reason), ("unsupported", "fake: no pipes [exit status 2]"))

    def test_signal_is_a_crash(self):
        o = self.one(GETPID, fake("kill -SEGV $$"))
        self.assertEqual((o.status, o.reason), ("crashed", "no result line in the output [killed by signal SIGSEGV]"))
        o = self.one(TRUE, fake("kill -ABRT $$"))
        self.assertEqual(o.status, "crashed")
        self.assertIn("killed by signal SIGABRT", o.reason)

    def test_panic_is_a_crash(self):
        o = self.one(GETPID, fake("echo \"thread 'main' panicked at src/x.rs:1:1:\" >&2; exit 101"))
        self.assertEqual(o.status, "crashed")
        self.assertIn("panicked at", o.reason)

    def test_timeout_kills_the_run(self):
        o = self.one(GETPID, fake("sleep 30"), timeout=0.5)
        self.assertEqual(o.status, "timeout")


class TmpfsCases(unittest.TestCase):
    def test_they_run_natively_and_leave_tmp_as_it_was(self):
        def leftovers():
            return sorted(p.name for p in Path("/tmp").glob("cordon-bench-*"))

        before = leftovers()
        for case in (c for c in run.CASES if c.group == "tmpfs"):
            o = run.run_one(case, run.Platform("native", []), SETTINGS, 30.0, dict(os.environ))
            self.assertTrue(o.ok, f"{case.name}: {o.reason}")
            self.assertGreater(o.value_ns, 0)
        self.assertEqual(leftovers(), before)


class SocketCases(unittest.TestCase):
    def test_they_run_natively(self):
        for case in (c for c in run.CASES if c.group == "socket" or c.name == "http_requests"):
            o = run.run_one(case, run.Platform("native", []), SETTINGS, 60.0, dict(os.environ))
            self.assertTrue(o.ok, f"{case.name}: {o.reason}")
            self.assertGreater(o.value_ns, 0)
            if case.name != "unix_pingpong" and case.name != "tcp_loopback_rr":
                self.assertIsNotNone(o.extra, case.name)


class EngineCases(unittest.TestCase):
    def test_a_micro_case_with_a_platform_command_runs_that(self):
        case = run.Case("engine_fake", "engine", "", "micro",
                        platform_argv=lambda s, p: ["/bin/sh", "-c", f"echo {p} >&2; echo BENCH case=x ops=1 ns=7 ns_per_op=7"])
        o = run.run_one(case, fake("exit 9"), SETTINGS, 30.0, dict(os.environ))
        self.assertTrue(o.ok, o.reason)
        self.assertEqual(o.value_ns, 7.0)

    def test_pod_start_runs_each_platform_with_its_handler(self):
        for plat, handler in run.CRI_HANDLERS.items():
            argv = run.pod_start_argv(SETTINGS, plat)
            self.assertEqual(argv[argv.index("-handler") + 1], handler)
            self.assertEqual(argv[-1], "bench")
        self.assertEqual(run.CRI_HANDLERS["native"], "runc")

    def test_oci_image_tar_is_an_image_layout(self):
        with tempfile.TemporaryDirectory() as d:
            tar = Path(d) / "image.tar"
            run.oci_image_tar(tar, "example/name:tag", {"bin/prog": "/bin/true"}, {"bin/alias": "prog"}, ["/bin/prog"])
            with tarfile.open(tar) as t:
                blob = lambda digest: t.extractfile(f"blobs/sha256/{digest.split(':')[1]}").read()
                index = json.load(t.extractfile("index.json"))
                entry = index["manifests"][0]
                self.assertEqual(entry["annotations"]["io.containerd.image.name"], "example/name:tag")
                manifest_data = blob(entry["digest"])
                self.assertEqual("sha256:" + hashlib.sha256(manifest_data).hexdigest(), entry["digest"])
                manifest = json.loads(manifest_data)
                config = json.loads(blob(manifest["config"]["digest"]))
                layer_digest = manifest["layers"][0]["digest"]
                self.assertEqual(config["rootfs"]["diff_ids"], [layer_digest])
                self.assertEqual(config["config"]["Entrypoint"], ["/bin/prog"])
                layer = blob(layer_digest)
                self.assertEqual("sha256:" + hashlib.sha256(layer).hexdigest(), layer_digest)
                with tarfile.open(fileobj=io.BytesIO(layer)) as lt:
                    self.assertEqual(sorted(lt.getnames()), ["bin/alias", "bin/prog"])
                    self.assertEqual(lt.getmember("bin/alias").linkname, "prog")


class OutputCheck(unittest.TestCase):
    def test_output_unlike_natives_is_wrong(self):
        env, digests = dict(os.environ), {}
        native, same, other = run.Series(), run.Series(), run.Series()
        run.check_output(TRUE, run.Platform("native", []), SETTINGS, 30, env, native, digests)
        run.check_output(TRUE, fake('exec "$@"'), SETTINGS, 30, env, same, digests)
        run.check_output(TRUE, fake('echo different'), SETTINGS, 30, env, other, digests)
        self.assertEqual(native.wrong_output, "")
        self.assertEqual(same.wrong_output, "")
        self.assertIn("differs from native", other.wrong_output)
        other.samples = [1.0]
        self.assertEqual(other.summary()["status"], "wrong-output")


class Summaries(unittest.TestCase):
    def test_min_median_and_partial_failures(self):
        se = run.Series(samples=[3.0, 1.0, 2.0], failures=[run.Outcome(False, reason="r", status="unsupported")])
        d = se.summary()
        self.assertEqual((d["status"], d["min"], d["median"]), ("ok", 1.0, 2.0))
        self.assertEqual(d["failed_rounds"], ["r"])

    def test_all_failed(self):
        se = run.Series(failures=[run.Outcome(False, reason="why", status="crashed")])
        self.assertEqual(se.summary()["status"], "crashed")
        self.assertEqual(se.summary()["reason"], "why")

    def test_ratio_needs_numbers_on_both_sides(self):
        results = {"c": {"native": {"status": "ok", "median": 2.0, "min": 1.0},
                         "a": {"status": "ok", "median": 8.0, "min": 2.0},
                         "b": {"status": "unsupported"}}}
        self.assertEqual(run.ratios(results, "c", "a"), (4.0, 2.0))
        self.assertIsNone(run.ratios(results, "c", "b"))
        self.assertIsNone(run.ratios(results, "c", "native"))


if __name__ == "__main__":
    unittest.main()
