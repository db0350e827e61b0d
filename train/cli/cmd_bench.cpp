// `headlab bench`: training-step throughput of a model, against the
// machine's physical limit and against its GEMM backend, both measured in the
// same process: MFU is the step's rate over the FMA peak of the widest vector
// unit (core/gemm_peak.h); the backend's own peak, on a large square product,
// says how much of that a GEMM alone reaches.
//
// With --precision bf16 the products take bf16 operands: MFU is then over
// the bf16 peak (AVX512_BF16's vdpbf16ps loop), and the backend's peak is
// that of bf16 products through the same GEMM path.
//
// FLOPs per training token (forward + backward): 6 N + 12 L T d, with N the
// number of Linear weights including the output head (the attention scores
// and their products add the second term): layers::ModelSpec::train_flops_per_step.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <utility>

#include "core/bf16_operands.h"
#include "core/gemm.h"
#include "core/gemm_kernels.h"
#include "core/gemm_replay.h"
#include "core/gemm_peak.h"
#include "core/ops.h"
#include "core/random.h"
#include "core/threads.h"
#include "layers/hook_set.h"
#include "layers/hooks_short_names.h"
#include "train/cli/cli.h"
#include "train/errors.h"
#include "train/dist.h"
#include "train/rank_agreement.h"
#include "train/session.h"

namespace headlab::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::string preset = "tiny";
  int64_t warmup = 5, steps = 20, runs = 5;
  bool json = false;
  bool kernels = false;  // --kernels: list the kernel of each of a step's GEMMs
  bool gemm_alone = false;  // --gemm-alone: a step's GEMM time inside the step and replayed alone
  std::vector<std::string> hooks;  // --hooks: also time forwards caching these ("all": every hook point)
};

// Presets of issue 8: all pre-LN with d_ff = 4d, AdamW, the `previous` task.
train::TrainConfig preset_config(const std::string& name) {
  train::TrainConfig c;
  c.task = "previous";
  c.analyze_every = 0;
  c.eval_batch = 1;
  struct P {
    const char* name;
    int64_t vocab, seq_len, batch, d_model, heads, layers;
  };
  static const P presets[] = {{"tiny", 16, 8, 64, 64, 2, 1}, {"small", 64, 32, 32, 128, 4, 2},
                              {"medium", 256, 128, 16, 256, 8, 4}};
  for (const P& p : presets) {
    if (name != p.name) continue;
    c.model.vocab = p.vocab;
    c.model.max_seq_len = p.seq_len;
    c.batch = p.batch;
    c.model.d_model = p.d_model;
    c.model.heads = p.heads;
    c.model.layers = p.layers;
    return c;
  }
  throw train::UsageError("--preset must be tiny, small or medium, got '" + name + "'");
}

// Best of up to twelve large square float32 products, in GFLOP/s, on all
// threads: what the GEMM backend can do here, in the precision set. It is a
// Linear's product (y = x W^T, the step's most common layout), and under
// --precision bf16 its operands are rounded once, as a training step rounds
// a Linear's (core/bf16_operands.h): the first product rounds them and the
// others reuse the copies, so the best one times the bf16 product alone,
// not a rounding pass over two million floats with it.
// At least three, and no more once 0.3 s is spent: twelve fast kernels take
// 0.05-0.2 s, but OpenBLAS's generic ones (a CPU it does not know) 0.8 s, and
// a product that long is seldom interrupted anyway.
constexpr int64_t kPeakGemmSize = 1024;
double gemm_peak_gflops() {
  constexpr int64_t n = kPeakGemmSize;
  constexpr double kBudgetSeconds = 0.3;
  core::Generator gen(1);
  // Uniform, not normal: the values do not change the speed, and drawing two
  // million normals (a log and a sincos a pair) costs more than the product.
  const core::Tensor x = gen.uniform({n, n}, -1, 1), w = gen.uniform({n, n}, -1, 1);
  const core::Bf16Operands rounded_once;
  double best = 0, spent = 0;
  for (int rep = 0; rep < 12 && (rep < 3 || spent < kBudgetSeconds); ++rep) {
    const auto t0 = Clock::now();
    const core::Tensor c = core::linear(x, w, core::Tensor());
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
    spent += s;
  }
  return best;
}

// Median ms of a no-grad forward of `batch`, plain and with every hook of
// `names` cached (what run_with_cache costs over a plain forward).
struct ForwardTimes {
  double plain_ms = 0, hooked_ms = 0;
};
ForwardTimes time_forwards(const layers::Transformer& model, const train::Batch& batch,
                           const std::vector<std::string>& names, const BenchArgs& args) {
  autograd::NoGradGuard no_grad;
  auto median_ms = [&](bool hooked) {
    auto forward = [&] {
      layers::HookSet cache(model.spec(), hooked ? names : std::vector<std::string>{});
      layers::Probe probe;
      probe.hooks = hooked ? &cache : nullptr;
      model.forward(batch.tokens, batch.batch, batch.seq_len, nullptr, hooked ? &probe : nullptr);
    };
    for (int64_t i = 0; i < args.warmup; ++i) forward();
    std::vector<double> ms;
    for (int64_t r = 0; r < args.runs; ++r) {
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < args.steps; ++i) forward();
      ms.push_back(1000 * std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(args.steps));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  return {median_ms(false), median_ms(true)};
}

// Whether a listed product is a bf16 one run on an f32 kernel (`widened`:
// core::bf16_products_widened in a bf16 step): its operands were rounded to
// bf16 and widened back, so the kernel, which sees float, names them src_f32.
bool emulated_bf16(const core::GemmKernelUse& k, bool widened) { return widened && k.layouts.starts_with("src_f32"); }

// One step's matmuls, by kernel (oneDNN's, "openblas", or "loops": headlab's
// own, for attention's small products): calls, the time of each call waited for,
// shapes (src:weights:dst; batched ones lead with the batch), the memory
// formats (ab row-major, ba transposed) and attributes.
void print_kernels(const std::vector<core::GemmKernelUse>& kernels, bool widened) {
  if (kernels.empty()) {
    std::printf("  no product was listed: this build of oneDNN has verbose mode off\n");
    return;
  }
  if (widened)
    std::printf("  bf16 emulated (this backend has no bf16 kernel here): each product marked * ran on an f32 kernel, "
                "its operands rounded to bf16 and widened back (bf16 products, f32 accumulation, at f32 speed); its "
                "f32 is what the kernel reads, not the precision\n");
  double total = 0;
  for (const core::GemmKernelUse& k : kernels) total += k.ms;
  std::printf("  one step's GEMMs by kernel (%.3f ms in all, each call timed on its own; loops: headlab's own, for "
              "small products; openblas: one call per product):\n",
              total);
  std::printf("  %-18s %5s %9s  %-28s %s\n", "kernel", "calls", "ms", "shapes src:wei:dst", "formats | attributes");
  for (const core::GemmKernelUse& k : kernels)
    std::printf("  %-18s %5d %9.3f  %-28s %s | %s%s\n", k.kernel.c_str(), k.calls, k.ms, k.shapes.c_str(),
                k.layouts.c_str(), k.attrs.c_str(), emulated_bf16(k, widened) ? " *" : "");
}

// One step's GEMM time inside the step against the same calls alone, and the
// shapes that lose the most inside it (all of them are in --json).
void print_gemm_times(const core::GemmTimes& t) {
  std::printf("  one step's GEMMs: %.3f ms inside the step (%ld calls, timed where they ran, summed over the threads), "
              "%.3f ms the same calls replayed alone (warm, best of 5 each): inside / alone %.2f\n",
              t.inside_ms, t.calls, t.alone_ms, t.alone_ms > 0 ? t.inside_ms / t.alone_ms : 0.0);
  constexpr std::size_t kShown = 8;
  if (t.shapes.empty()) return;
  std::printf("  the shapes that lose the most inside the step (precision, batch x op(A) op(B) m x n x k; --json "
              "lists all %zu):\n",
              t.shapes.size());
  std::printf("  %-36s %5s %10s %10s %10s\n", "shape", "calls", "inside ms", "alone ms", "lost ms");
  for (std::size_t i = 0; i < std::min(kShown, t.shapes.size()); ++i) {
    const core::GemmShapeTimes& g = t.shapes[i];
    std::printf("  %-36s %5ld %10.3f %10.3f %+10.3f\n", g.shape.c_str(), g.calls, g.inside_ms, g.alone_ms,
                g.inside_ms - g.alone_ms);
  }
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

int run_bench(const BenchArgs& args, const ConfigFlags& flags) {
  if (args.warmup < 0) throw train::UsageError("--warmup-steps must be 0 or more, got " + std::to_string(args.warmup));
  using Flag = std::pair<const char*, int64_t>;
  for (const auto& [flag, value] : {Flag{"--bench-steps", args.steps}, Flag{"--runs", args.runs}})
    if (value < 1) throw train::UsageError(std::string(flag) + " must be at least 1, got " + std::to_string(value));
  train::TrainConfig config = preset_config(args.preset);
  flags.apply(config);
  config.validate();
  use_gemm_backend(config.gemm);
  use_precision(config.precision);
  // Under mpirun -np N the N processes train one model (one slice of the
  // batch each); rank 0 reports.
  const train::dist::World& world = train::dist::world();
  std::unique_ptr<train::Session> built;
  train::dist::all_or_none(world, [&] {
    try {
      built = std::make_unique<train::Session>(config, world);
    } catch (const train::UsageError& e) {
      // The preset's sequence length, which the user never typed, refused by
      // a task with a length of its own (modular addition's 3): say whose it is.
      const std::vector<std::string> typed = flags.given();
      if (std::string(e.what()).find("seq-len") == std::string::npos ||
          std::find(typed.begin(), typed.end(), "seq-len") != typed.end())
        throw;
      throw train::UsageError(std::string(e.what()) + " (--seq-len " + std::to_string(config.model.max_seq_len) +
                              " is the " + args.preset + " preset's: give --seq-len 0 for the task's own)");
    }
  });
  train::Session& session = *built;
  use_threads_for(session);
  if (world.size() > 1) {
    // The ranks step together: they must time the same steps of the same run.
    train::RunFingerprint mine = train::run_fingerprint(session);
    mine.push_back({"--warmup-steps", std::to_string(args.warmup), false});
    mine.push_back({"--bench-steps", std::to_string(args.steps), false});
    mine.push_back({"--runs", std::to_string(args.runs), false});
    train::check_ranks_agree(world, mine);
  }
  const layers::ModelSpec& m = session.model().spec();
  std::vector<std::string> hooks = args.hooks;
  if (hooks.size() == 1 && hooks[0] == "all") hooks = layers::hook_names(m);
  for (std::string& name : hooks) {
    try {
      name = layers::full_hook_name(name);  // TransformerLens's compact names too, as eval's --hooks
      layers::check_hook_name(m, name);
    } catch (const std::invalid_argument& e) {
      throw train::UsageError(std::string("--hooks: ") + e.what() + " (or give --hooks all)");
    }
  }

  // The session's own sizes: the task's sequence length, and the whole
  // training set under --batch 0.
  const double tokens = static_cast<double>(session.batch_rows() * m.max_seq_len);
  // Model or task flags over the preset make another model: the report says so.
  bool custom_model = false;
  for (const std::string& flag : flags.given())
    for (const char* model_flag : {"task", "vocab", "seq-len", "layers", "heads", "d-model", "d-ff", "attn-only",
                                   "no-layernorm", "bidirectional", "batch", "train-size", "train-fraction"})
      custom_model = custom_model || flag == model_flag;
  const double flops_per_step = m.train_flops_per_step(session.batch_rows());

  for (int64_t i = 0; i < args.warmup; ++i) session.step();
  std::vector<double> ms;
  const double comm_before = world.seconds_communicating();
  for (int64_t r = 0; r < args.runs; ++r) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < args.steps; ++i) session.step();
    ms.push_back(1000 * std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(args.steps));
  }
  const double comm_ms = 1000 * (world.seconds_communicating() - comm_before) / static_cast<double>(args.runs * args.steps);
  if (!world.is_root()) return 0;
  ForwardTimes forwards;
  if (!hooks.empty())
    forwards = time_forwards(session.model(), session.task().eval_batch(session.batch_rows(), config.seed), hooks, args);
  // After the timed runs: verbose mode makes oneDNN wait for and time each call.
  std::vector<core::GemmKernelUse> kernels;
  if (args.kernels) kernels = core::gemm_kernels_of([&] { session.step(); });
  core::GemmTimes gemm_times;
  if (args.gemm_alone) gemm_times = core::gemm_time_inside_and_alone([&] { session.step(); });
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const double gflops = flops_per_step / (median / 1000) / 1e9;
  const double gemm_peak = gemm_peak_gflops();
  const core::FmaPeak fma = core::fma_peak(core::num_threads());
  const char* backend = core::gemm_backend_name(core::gemm_backend());
  // The arithmetic's own limit: bf16 products' where the step multiplies in
  // bf16 and the CPU has bf16 units (else, as for f32, the FMA peak).
  const bool bf16 = config.precision == "bf16";
  const core::FmaPeak bf16_peak = bf16 ? core::bf16_peak(core::num_threads()) : core::FmaPeak{"none", 0};
  const core::FmaPeak peak = bf16_peak.gflops > 0 ? bf16_peak : fma;
  const bool widened = bf16 && core::bf16_products_widened(core::gemm_backend());
  // How the step ran on the threads: its slices side by side (train/step_lanes.h), or one slice op by op.
  const auto lanes = std::min<int64_t>(core::num_threads(), static_cast<int64_t>(session.step_pieces().size()));
  nlohmann::json result = {{"preset", args.preset},
                           {"model_flags", custom_model},
                           {"batch_rows", session.batch_rows()},
                           {"seq_len", m.max_seq_len},
                           {"gflop_per_step", flops_per_step / 1e9},
                                 {"threads", core::num_threads()},
                                 {"slices_side_by_side", lanes},
                                 {"processes", world.size()},
                                 {"comm_ms_per_step", comm_ms},
                                 {"parameters", session.model().num_parameters()},
                                 {"ms_per_step", median},
                                 {"ms_per_step_min", ms.front()},
                                 {"ms_per_step_max", ms.back()},
                                 {"tokens_per_s", tokens / (median / 1000)},
                                 {"gflops", gflops},
                                 {"gemm_backend", backend},
                                 {"openblas_kernels", core::openblas_kernels()},
                                 {"openblas_better_coretype", core::openblas_better_coretype()},
                                 {"precision", config.precision},
                                 {"emulated_bf16", widened},
                                 {"gemm_peak_gflops", gemm_peak},
                                 {"fma_isa", fma.isa},
                                 {"fma_peak_gflops", fma.gflops},
                                 {"mfu", gflops / peak.gflops},
                                 {"mfu_peak_isa", peak.isa},
                                 {"mfu_peak_gflops", peak.gflops},
                                 {"gemm_peak_of_fma_peak", gemm_peak / fma.gflops},
                                 {"peak_rss_mib", peak_rss_mib()}};
  if (!hooks.empty()) {
    result["forward_ms"] = forwards.plain_ms;
    result["forward_hooked_ms"] = forwards.hooked_ms;
    result["hooks_cached"] = hooks.size();
  }
  if (args.kernels) {
    result["kernels"] = nlohmann::json::array();
    for (const core::GemmKernelUse& k : kernels)
      result["kernels"].push_back({{"kernel", k.kernel}, {"shapes", k.shapes}, {"layouts", k.layouts},
                                   {"attrs", k.attrs}, {"calls", k.calls}, {"ms", k.ms},
                                   {"emulated_bf16", emulated_bf16(k, widened)}});
  }
  if (args.gemm_alone) {
    result["gemm_calls"] = gemm_times.calls;
    result["gemm_inside_ms"] = gemm_times.inside_ms;
    result["gemm_alone_ms"] = gemm_times.alone_ms;
    result["gemm_shapes"] = nlohmann::json::array();
    for (const core::GemmShapeTimes& g : gemm_times.shapes)
      result["gemm_shapes"].push_back(
          {{"shape", g.shape}, {"calls", g.calls}, {"inside_ms", g.inside_ms}, {"alone_ms", g.alone_ms}});
  }
  if (args.json) {
    std::cout << result.dump() << '\n';
    return 0;
  }
  const std::string label = custom_model ? args.preset + " preset with the model flags given" : args.preset;
  std::printf("%s: %lld layer(s), d_model %lld, %lld heads, batch %lld x %lld tokens, %lld parameters, %d thread(s)%s\n",
              label.c_str(), static_cast<long long>(m.layers), static_cast<long long>(m.d_model),
              static_cast<long long>(m.heads), static_cast<long long>(session.batch_rows()),
              static_cast<long long>(m.max_seq_len), static_cast<long long>(session.model().num_parameters()),
              core::num_threads(),
              lanes > 1 ? (" (" + std::to_string(lanes) + " slices side by side, one per thread)").c_str() : "");
  std::printf("  %.3f ms/step (median of %lld runs of %lld steps; min %.3f, max %.3f)\n", median,
              static_cast<long long>(args.runs), static_cast<long long>(args.steps), ms.front(), ms.back());
  if (world.size() > 1)
    std::printf("  %d processes, one slice each; %.3f ms/step in the gradient exchange (waits included)\n",
                world.size(), comm_ms);
  std::printf("  %.0f tokens/s, %.2f GFLOP/s, peak RSS %.1f MiB\n", tokens / (median / 1000), gflops,
              peak_rss_mib());
  if (bf16 && bf16_peak.gflops > 0)
    std::printf("  MFU %.1f%% of the %.1f GFLOP/s bf16 peak (%s loop, %d thread(s)); the f32 FMA peak is %.1f (%s)\n",
                100 * gflops / peak.gflops, peak.gflops, peak.isa, core::num_threads(), fma.gflops, fma.isa);
  else
    std::printf("  MFU %.1f%% of the %.1f GFLOP/s %s FMA peak (%d thread(s))%s\n", 100 * gflops / fma.gflops,
                fma.gflops, fma.isa, core::num_threads(), bf16 ? " (no bf16 units here to measure a bf16 peak)" : "");
  std::printf("  GEMM backend %s, %s: %.1f GFLOP/s on a %lld^3 %s product (%.1f%% of the %s peak); the step runs at "
              "%.1f%% of it\n",
              backend, bf16 ? (widened ? "bf16 operands emulated on f32 kernels" : "bf16 operands") : "f32", gemm_peak, static_cast<long long>(kPeakGemmSize),
              bf16 ? "bf16" : "f32", 100 * gemm_peak / peak.gflops, bf16 && bf16_peak.gflops > 0 ? "bf16" : "FMA",
              100 * gflops / gemm_peak);
  if (const std::string note = core::openblas_fallback_note();
      !note.empty() && core::gemm_backend() == core::GemmBackend::openblas)
    std::printf("  %s\n", note.c_str());
  if (!hooks.empty())
    std::printf("  forward (no grad, median): %.3f ms plain, %.3f ms caching %zu hook point(s): %.2fx\n",
                forwards.plain_ms, forwards.hooked_ms, hooks.size(), forwards.hooked_ms / forwards.plain_ms);
  if (args.gemm_alone) print_gemm_times(gemm_times);
  if (args.kernels) print_kernels(kernels, widened);
  return 0;
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  app.add_option("--preset", args->preset,
                 "tiny (V16 T8 B64 d64 h2 L1), small (V64 T32 B32 d128 h4 L2) or medium (V256 T128 B16 d256 h8 L4)")
      ->default_val(args->preset);
  app.add_option("--warmup-steps", args->warmup, "untimed steps first")
      ->default_val(args->warmup)
      ->check(in_range<int64_t>());
  app.add_option("--bench-steps", args->steps, "timed steps per run")->default_val(args->steps)->check(in_range<int64_t>());
  app.add_option("--runs", args->runs, "timed runs; the median is reported")
      ->default_val(args->runs)
      ->check(in_range<int64_t>());
  app.add_option("--hooks", args->hooks,
                 "also time a no-grad forward of the batch caching these hook points (comma-separated, or all) "
                 "against a plain one")
      ->delimiter(',');
  app.add_flag("--json", args->json, "print one JSON object");
  app.add_flag("--kernels", args->kernels,
               "after the timing, list the kernel each GEMM of one step ran on (oneDNN's, from its verbose output; "
               "openblas; or headlab's loops, for attention's small products; bf16 ones run on an f32 kernel where "
               "the backend has no bf16 kernel are marked emulated)");
  app.add_flag("--gemm-alone", args->gemm_alone,
               "after the timing, time one step's GEMMs where they run and again replayed alone (the same shapes, "
               "layouts and precision, warm), and print both, with the shapes that lose the most inside the step");
  auto flags = std::make_shared<ConfigFlags>(
      app, std::vector<std::string>{"task", "vocab", "seq-len", "layers", "heads", "d-model", "d-ff", "attn-only",
                                    "no-layernorm", "bidirectional", "batch", "train-size", "train-fraction", "lr",
                                    "optimizer", "weight-decay", "clip", "seed", "threads", "gemm", "precision",
                                    "micro-batches"});
  // The help shows the defaults the presets really use: the task they share,
  // and "the preset's" where they differ.
  app.get_option("--task")->default_str(preset_config(args->preset).task);
  for (const char* name : {"vocab", "seq-len", "layers", "heads", "d-model", "batch"}) {
    CLI::Option* option = app.get_option(std::string("--") + name);
    option->default_str("")->description(option->get_description() + " (default: the preset's)");
  }
  app.footer("Model flags override the preset. FLOPs per token: 6 N + 12 L T d (N: Linear weights incl. the head).");
  return [args, flags] { return run_bench(*args, *flags); };
}

}  // namespace headlab::cli
