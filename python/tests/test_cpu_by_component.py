"""scripts/bench/cpu_by_component.py: the CPU per step that train.sh reports by component, on made-up samples."""
import importlib.util
import json
import os

import pytest

_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "bench", "cpu_by_component.py")
_spec = importlib.util.spec_from_file_location("cpu_by_component", _SCRIPT)
cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu)
HZ = os.sysconf("SC_CLK_TCK")


def sample(time, busy, processes):
    # /proc/stat's cpu line: user nice system idle iowait irq softirq ...; busy = user + nice + system + irq + softirq
    return {"time": time, "stat": [busy, 0, 0, 1000, 0, 0, 0, 0, 0, 0], "p": processes}


def write(tmp_path, samples):
    path = tmp_path / "cpu.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return str(path)


def report(capsys, *argv):
    assert cpu.main(["report", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_should_charge_each_components_ticks_between_the_samples_nearest_the_window_per_step(tmp_path, capsys):
    before = {"10": {"c": "trainer", "t": 100},
              "20": {"c": "sidecar", "t": 60, "threads": {"20": ["endpoint", 50], "21": ["JIT", 10]}},
              "30": {"c": "daemon", "t": 5}}
    after = {"10": {"c": "trainer", "t": 300},
             "20": {"c": "sidecar", "t": 210, "threads": {"20": ["endpoint", 150], "21": ["JIT", 60]}},
             "30": {"c": "trainer", "t": 40},  # the pid reused by a process of another kind: counted from zero
             "40": {"c": "sidecar", "t": 20, "threads": {"40": ["endpoint", 20]}}}  # born in the window
    path = write(tmp_path, [sample(0.0, 0, {}), sample(1.0, 100, before), sample(3.0, 600, after),
                            sample(9.0, 900, after)])

    out = report(capsys, path, "--start", "1.1", "--end", "2.9", "--steps", "10")

    tick_ms = 1000.0 / HZ
    assert out["window_s"] == pytest.approx(2.0)
    assert out["steps"] == 10
    assert out["busy_ms_per_step"] == pytest.approx(500 * tick_ms / 10)
    assert out["components"]["trainer"] == pytest.approx((200 + 40) * tick_ms / 10)
    assert out["components"]["sidecar"] == pytest.approx((150 + 20) * tick_ms / 10)
    assert out["components"]["sidecar endpoint"] == pytest.approx((100 + 20) * tick_ms / 10)
    assert out["components"]["sidecar JIT"] == pytest.approx(50 * tick_ms / 10)
    assert "daemon" not in out["components"], "a process gone from the last sample is not charged"


def test_should_take_the_window_from_a_runs_step_end_times_leaving_out_the_warm_up(tmp_path, capsys):
    processes = [{"10": {"c": "trainer", "t": t}} for t in (0, 100, 400, 1000)]
    path = write(tmp_path, [sample(t, 0, p) for t, p in zip((10.0, 11.0, 14.0, 20.0), processes)])
    results = tmp_path / "run.json"
    results.write_text(json.dumps({"step_end_unix": [11.0, 12.0, 13.0, 14.0]}))

    out = report(capsys, path, "--results", str(results), "--skip", "1")

    # from the end of step 0 (11.0) to the end of the last (14.0): the three steps after the one left out
    assert out["steps"] == 3
    assert out["components"]["trainer"] == pytest.approx(300 * 1000.0 / HZ / 3)


def test_should_name_the_parts_of_the_jvms_by_their_threads():
    assert cpu.thread_part("sidecar", "C2 CompilerThre") == "JIT"
    assert cpu.thread_part("sidecar", "C1 CompilerThre") == "JIT"
    assert cpu.thread_part("sidecar", "java") == "endpoint"
    assert cpu.thread_part("sidecar", "sidecar-control") == "control"
    assert cpu.thread_part("daemon", "netreduce-datap") == "lanes"
    assert cpu.thread_part("daemon", "java") == "other"


def test_should_refuse_a_window_without_samples_or_steps(tmp_path, capsys):
    path = write(tmp_path, [sample(1.0, 0, {})])
    assert cpu.main(["report", path, "--start", "0", "--end", "2", "--steps", "1"]) == 1
    assert "fewer than two samples" in capsys.readouterr().err


def test_should_charge_a_process_that_exits_just_after_the_window_up_to_its_last_sample(tmp_path, capsys):
    # the trainers leave right after their last step: the sample nearest the window's end finds them gone
    first = {"10": {"c": "trainer", "t": 100}, "11": {"c": "trainer", "t": 50}}
    middle = {"10": {"c": "trainer", "t": 250}, "11": {"c": "trainer", "t": 90}}
    last = {"11": {"c": "trainer", "t": 120}}
    path = write(tmp_path, [sample(1.0, 0, first), sample(2.0, 0, middle), sample(3.0, 0, last)])

    out = report(capsys, path, "--start", "1.0", "--end", "3.0", "--steps", "1")

    assert out["components"]["trainer"] == pytest.approx((150 + 70) * 1000.0 / HZ)


def test_should_tell_a_kernel_thread_from_a_process_that_is_exiting():
    # both have an empty command line; only the kernel thread has PF_KTHREAD in its flags
    assert cpu.classify("2", cpu.flags_of(open("/proc/2/stat").read())) == "kernel"  # kthreadd
    assert cpu.flags_of("123 (python3) Z 1 123 123 0 -1 4227084 0 0 0 0 5 6 0 0") == 4227084
    assert cpu.classify(str(os.getpid()), 0) == "python other"


def test_should_charge_both_the_process_that_left_and_the_one_that_took_its_pid(tmp_path, capsys):
    first = {"10": {"c": "trainer", "t": 100}}
    middle = {"10": {"c": "trainer", "t": 130}}
    last = {"10": {"c": "sidecar", "t": 25}}  # the trainer left; a sidecar was given its pid
    path = write(tmp_path, [sample(1.0, 0, first), sample(2.0, 0, middle), sample(3.0, 0, last)])

    out = report(capsys, path, "--start", "1.0", "--end", "3.0", "--steps", "1")

    assert out["components"]["trainer"] == pytest.approx(30 * 1000.0 / HZ)
    assert out["components"]["sidecar"] == pytest.approx(25 * 1000.0 / HZ)
