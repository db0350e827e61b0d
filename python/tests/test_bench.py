"""bench/python_hooks.py reports what it times."""
import json
import subprocess
import sys

from conftest import BUILD, COPY_POINTS, REPO


def test_the_hook_bench_counts_the_points_it_caches_and_prints_json_alone():
    # QA20: it counted TransformerLens's copy points, which run_with_cache(names=None) leaves out, as timed, and
    # its --json line came after the run's whole report on stdout.
    done = subprocess.run([sys.executable, str(REPO / "bench" / "python_hooks.py"), "--build", str(BUILD),
                           "--rounds", "1", "--threads", "1", "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    layers = 4  # the medium preset's
    assert result["copy_points_not_cached"] == len(COPY_POINTS) * layers
    # Per block: resid_pre, ln1's 2, q k v, scores, pattern, z, result, attn_out, resid_mid, ln2's 2, pre, post,
    # mlp_out, resid_post (18); then embed, pos_embed and ln_final's 2.
    assert result["hook_points"] == 18 * layers + 4
    assert result["forward_ms"] > 0 and result["run_with_cache_ms"] > 0


def _compare_torch():
    import importlib.util
    spec = importlib.util.spec_from_file_location("compare_torch", REPO / "bench" / "compare_torch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compare_torch_says_what_a_target_asks_of_the_arithmetic():
    # Two rounds of a 2 GFLOP step: the twin took 40 then 80 ms, so a x0.5 target is 20 then 40 ms, 100 then
    # 50 GFLOP/s, over peaks of 100 and 125 GFLOP/s measured in headlab's own process.
    target_line = _compare_torch().target_line
    mine = [{"gflop_per_step": 2.0, "mfu_peak_gflops": 100.0, "mfu": 0.3, "mfu_peak_isa": "AVX-512"},
            {"gflop_per_step": 2.0, "mfu_peak_gflops": 125.0, "mfu": 0.45, "mfu_peak_isa": "AVX-512"}]
    twins = [{"ms_per_step": 40.0}, {"ms_per_step": 80.0}]
    line = target_line("small", 1, "headlab", 0.5, 0.6, mine, twins)
    assert "target x0.5 of its twin: missed;" in line
    assert "it asks for 40-100% of the AVX-512 peak" in line
    assert line.endswith("the step reached 30-45%")
    one_round = target_line("small", 1, "headlab", 0.5, 0.5, mine[:1], twins[:1])
    assert ": met;" in one_round and "asks for 100% of" in one_round
