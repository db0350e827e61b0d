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
