// Every subcommand and option given a bad value fails the same clean way:
// exit status 2 (1 for a runtime error), exactly one line on stderr that
// names the flag or value, nothing on stdout, no crash, and nothing written:
// the working folder stays empty (so no --out folder and no runs/ default)
// and the files the command was pointed at stay as they were.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

namespace fs = std::filesystem;

struct BadCase {
  std::string name;
  // Placeholders: {out} a path in the empty working folder; {run} a finished
  // tiny run and {ck} its checkpoint; {file} a text file; {dir} a folder
  // holding one file; {missing} a path that does not exist; {cfg:TEXT} a
  // --config file holding TEXT.
  std::vector<std::string> args;
  int status;
  std::vector<std::string> mentions;  // each must appear in the stderr line
  std::vector<std::string> absent = {};  // advice that would not work here: none may appear
};

std::ostream& operator<<(std::ostream& os, const BadCase& c) { return os << c.name; }

std::vector<std::string> train_tiny(const std::vector<std::pair<std::string, std::string>>& changes) {
  return train_command("{out}", changes);
}

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

const std::vector<BadCase>& cases() {
  static const std::vector<BadCase> all = [] {
    std::vector<BadCase> c;
    // A flag whose value is missing (last on the line).
    for (const char* flag : {"--d-model", "--steps", "--task", "--config", "--init", "--lr", "--out"})
      c.push_back({std::string("train_missing_value_") + (flag + 2), {"train", flag}, 2, {flag}});
    c.push_back({"train_missing_value_resume", {"train", "--resume"}, 2, {"--resume"}});
    // Negative values.
    for (const char* flag : {"--d-model", "--steps", "--batch", "--layers", "--heads", "--vocab", "--seq-len",
                             "--warmup", "--threads", "--log-every", "--analyze-every", "--checkpoint-every", "--snapshot-every",
                             "--eval-batch", "--d-ff", "--seed", "--train-size"})
      c.push_back({std::string("train_negative_") + (flag + 2), train_tiny({{flag, "-3"}}), 2, {flag, "-3"}});
    for (const char* flag : {"--lr", "--clip", "--min-lr"})
      c.push_back({std::string("train_negative_") + (flag + 2), train_tiny({{flag, "-0.5"}}), 2, {flag, "-0.5"}});
    // Zero where at least 1 is needed.
    for (const char* flag : {"--d-model", "--heads", "--layers", "--batch", "--lr", "--eval-batch"})
      c.push_back({std::string("train_zero_") + (flag + 2), train_tiny({{flag, "0"}}), 2, {flag}});
    // Not a number.
    c.push_back({"train_non_numeric_d_model", train_tiny({{"--d-model", "abc"}}), 2, {"--d-model", "abc", "whole number"}});
    c.push_back({"train_non_numeric_lr", train_tiny({{"--lr", "fast"}}), 2, {"--lr", "fast", "is not a number"}});
    c.push_back({"train_non_numeric_seed", train_tiny({{"--seed", "x1"}}), 2, {"--seed", "x1"}});
    c.push_back({"train_non_numeric_threads", train_tiny({{"--threads", "two"}}), 2, {"--threads", "two"}});
    c.push_back({"train_unknown_gemm", train_tiny({{"--gemm", "mkl"}}), 2, {"--gemm", "mkl"}});
    c.push_back({"train_config_unknown_gemm", with(train_tiny({}), {"--config", "{cfg:{\"gemm\": \"blis\"}}"}), 2,
                 {"--gemm", "blis"}});
    c.push_back({"train_unknown_precision", train_tiny({{"--precision", "fp8"}}), 2, {"--precision", "fp8"}});
    c.push_back({"train_config_unknown_precision",
                 with(train_tiny({}), {"--config", "{cfg:{\"precision\": \"f16\"}}"}), 2, {"--precision", "f16"}});
    c.push_back({"bench_unknown_precision", {"bench", "--precision", "half"}, 2, {"--precision", "half"}});
    c.push_back({"train_fractional_vocab", train_tiny({{"--vocab", "8.5"}}), 2, {"--vocab", "8.5"}});
    c.push_back({"train_non_boolean_flag", train_tiny({{"--attn-only=maybe", ""}}), 2, {"--attn-only", "maybe"}});
    // Out of range.
    c.push_back({"train_vocab_too_small", train_tiny({{"--vocab", "1"}}), 2, {"vocab 1"}});
    c.push_back({"train_vocab_too_large", train_tiny({{"--vocab", "1000000000000"}}), 2, {"vocab 1000000000000"}});
    c.push_back({"train_too_many_threads", train_tiny({{"--threads", "5000"}}), 2, {"--threads", "5000"}});
    c.push_back({"train_infinite_lr", train_tiny({{"--lr", "inf"}}), 2, {"--lr", "inf"}});
    c.push_back({"train_nan_lr", train_tiny({{"--lr", "nan"}}), 2, {"--lr", "nan"}});
    c.push_back({"train_nan_clip", train_tiny({{"--clip", "nan"}}), 2, {"--clip", "nan"}});
    c.push_back({"train_nan_weight_decay", train_tiny({{"--weight-decay", "nan"}}), 2, {"--weight-decay", "got nan"}});
    // Values training cannot survive: refused naming them, not blamed on --lr later.
    c.push_back({"train_huge_weight_decay", train_tiny({{"--weight-decay", "1e308"}}), 2,
                 {"--weight-decay 1e+308 is too large for --lr 0.001"}});
    c.push_back({"train_huge_init_std", train_tiny({{"--init-std", "1e308"}}), 2, {"--init-std 1e308 is above 100"}});
    c.push_back({"train_eps_below_float32", train_tiny({{"--eps", "1e-300"}}), 2, {"--eps 1e-300", "1.18e-38"}});
    c.push_back({"train_lr_beyond_float32", train_tiny({{"--lr", "1e308"}}), 2, {"--lr 1e+308", "3.4e38"}});
    c.push_back({"train_min_lr_above_lr", train_tiny({{"--min-lr", "1"}}), 2, {"--min-lr"}});
    c.push_back({"train_unknown_optimizer", train_tiny({{"--optimizer", "adagrad"}}), 2, {"--optimizer", "adagrad"}});
    c.push_back({"train_unknown_schedule", train_tiny({{"--schedule", "wavy"}}), 2, {"--schedule", "wavy"}});
    c.push_back({"train_schedule_typo", train_tiny({{"--schedule", "cosin"}}), 2,
                 {"--schedule must be constant, cosine, linear or step, got 'cosin' (did you mean cosine?)"}});
    c.push_back({"train_absurd_d_model", train_tiny({{"--d-model", "1000000"}}), 2, {"--d-model"}});
    c.push_back({"train_absurd_layers", train_tiny({{"--layers", "100000000"}}), 2, {"--layers"}});
    c.push_back({"train_batch_beyond_32_bit_tokens", train_tiny({{"--batch", "99999999999"}}), 2,
                 {"--batch 99999999999", "2^31"}});
    c.push_back({"train_batch_beyond_memory", train_tiny({{"--batch", "100000000"}}), 2, {"memory", "--batch"}});
    c.push_back({"train_eval_batch_beyond_memory", train_tiny({{"--eval-batch", "100000000"}}), 2,
                 {"memory", "--eval-batch"}});
    c.push_back({"train_seq_len_beyond_memory", train_tiny({{"--seq-len", "100000"}}), 2, {"memory", "--seq-len"}});
    // Model structure and task limits.
    c.push_back({"train_d_model_not_divisible_by_heads", train_tiny({{"--heads", "3"}}), 2,
                 {"--d-model 16", "--heads 3"}});
    // A size beyond headlab's bound is named as that, not as a head count
    // that does not divide it ("try --heads 1 or 7").
    c.push_back({"train_d_model_at_int64_max", train_tiny({{"--d-model", "9223372036854775807"}, {"--heads", "2"}}), 2,
                 {"--d-model 9223372036854775807 is beyond the 1073741824 headlab supports"}});
    c.push_back({"train_seq_len_beyond_modular_addition", train_tiny({{"--task", "modular-addition"}, {"--seq-len", "5"}}),
                 2, {"modular-addition", "seq-len 5"}});
    c.push_back({"train_even_seq_len_for_sort", train_tiny({{"--task", "sort"}, {"--seq-len", "4"}}), 2,
                 {"sort", "seq-len 4"}});
    c.push_back({"train_induction_seq_len_beyond_vocab",
                 train_tiny({{"--task", "induction"}, {"--seq-len", "40"}, {"--vocab", "8"}}), 2,
                 {"induction", "vocab 8", "vocab >= 11"}});
    c.push_back({"train_seq_len_too_short", train_tiny({{"--seq-len", "1"}}), 2, {"seq-len 1"}});
    // Beyond a whole number's range: refused, not read as the largest one.
    c.push_back({"train_seed_beyond_uint64", train_tiny({{"--seed", "99999999999999999999"}}), 2,
                 {"--seed", "99999999999999999999", "18446744073709551615"}});
    c.push_back({"train_log_every_beyond_int64", train_tiny({{"--log-every", "-99999999999999999999"}}), 2,
                 {"--log-every", "-99999999999999999999", "9223372036854775807"}});
    c.push_back({"eval_seed_beyond_uint64", {"eval", "{ck}", "--seed", "18446744073709551616"}, 2,
                 {"--seed", "18446744073709551616"}});
    c.push_back({"train_unknown_task", train_tiny({{"--task", "nope"}}), 2, {"nope"}});
    c.push_back({"train_empty_task", train_tiny({{"--task", "''"}}), 2, {"task"}});
    // An empty value would fall back to the flag's default without a word.
    c.push_back({"train_empty_data", train_tiny({{"--data", "''"}}), 2, {"--data is given an empty value"}});
    c.push_back({"train_empty_data_after_equals", train_tiny({{"--data=", ""}}), 2,
                 {"--data is given an empty value"}});
    c.push_back({"eval_empty_dump_logits", {"eval", "{ck}", "--dump-logits", "''"}, 2,
                 {"headlab eval: error: --dump-logits is given an empty value"}});
    c.push_back({"eval_empty_checkpoint", {"eval", "''"}, 2, {"the checkpoint argument is empty"}});
    // A warmup as long as the decay's horizon leaves no decay.
    c.push_back({"train_warmup_beyond_cosine_horizon",
                 train_tiny({{"--schedule", "cosine"}, {"--warmup", "100"}, {"--steps", "5"}}), 2,
                 {"--warmup 100 leaves no room for the cosine decay, which ends at step 5 (--steps)"}});
    // Files.
    c.push_back({"train_config_missing", with(train_tiny({}), {"--config", "{missing}"}), 2, {"--config", "{missing}"}});
    c.push_back({"train_config_is_a_folder", with(train_tiny({}), {"--config", "{dir}"}), 2,
                 {"headlab train: error: --config {dir} is a folder; give a file"}});
    c.push_back({"train_config_not_json", with(train_tiny({}), {"--config", "{file}"}), 2, {"--config", "JSON"}});
    c.push_back({"train_config_unknown_key", with(train_tiny({}), {"--config", "{cfg:{\"bogus\": 1}}"}), 2,
                 {"bogus"}});
    c.push_back({"train_config_wrong_type", with(train_tiny({}), {"--config", "{cfg:{\"layers\": \"two\"}}"}), 2,
                 {"\"layers\" takes a whole number", "\"two\""}});
    // 2^32 would wrap to 0 (all cores) in the int field.
    c.push_back({"train_config_threads_beyond_int", with(train_tiny({}), {"--config", "{cfg:{\"threads\": 4294967296}}"}),
                 2, {"\"threads\" takes a whole number from -2147483648 to 2147483647", "4294967296"}});
    c.push_back({"train_config_bad_value", with(train_tiny({}), {"--config", "{cfg:{\"layers\": 0}}"}), 2,
                 {"--layers"}});
    c.push_back({"train_data_missing", train_tiny({{"--data", "{missing}"}, {"--vocab", "8"}, {"--seq-len", "6"}}), 2,
                 {"{missing}"}});
    c.push_back({"train_data_is_a_folder", train_tiny({{"--data", "{dir}"}, {"--vocab", "8"}, {"--seq-len", "6"}}), 2,
                 {"{dir}", "is a folder, not a file"}});
    c.push_back({"train_data_not_jsonl", train_tiny({{"--data", "{file}"}, {"--vocab", "8"}, {"--seq-len", "6"}}), 2,
                 {"notes.txt:1", "JSON"}});
    // JSON input that could crash or mislead: deep nesting, NUL bytes,
    // repeated keys, endless lines, huge strings (the message is cut).
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    c.push_back({"train_config_nested_deep", with(train_tiny({}), {"--config", "{cfg:{\"layers\": " + deep + "}}"}), 2,
                 {"--config", "nesting"}});
    c.push_back({"train_config_nul_byte", with(train_tiny({}), {"--config", std::string("{cfg:{\"steps\": 1}") + '\0' + "garbage}"}),
                 2, {"--config", "NUL"}});
    c.push_back({"train_config_duplicate_key",
                 with(train_tiny({}), {"--config", "{cfg:{\"steps\": 1, \"steps\": 2}}"}), 2, {"steps", "twice"}});
    c.push_back({"train_config_huge_string",
                 with(train_tiny({}), {"--config", "{cfg:{\"layers\": \"" + std::string(500000, 'x') + "\"}}"}), 2,
                 {"layers", "xxx..."}});
    c.push_back({"train_config_endless", with(train_tiny({}), {"--config", "/dev/zero"}), 2, {"--config", "bytes"}});
    c.push_back({"train_data_nested_deep",
                 train_tiny({{"--data", "{cfg:{\"tokens\": " + deep + "}}"}, {"--vocab", "8"}, {"--seq-len", "6"}}), 2,
                 {"config0.json:1", "nesting"}});
    c.push_back({"train_data_endless_line", train_tiny({{"--data", "/dev/zero"}, {"--vocab", "8"}, {"--seq-len", "6"}}), 2,
                 {"/dev/zero", "not a regular file"}});
    c.push_back({"train_huge_task_name", train_tiny({{"--task", std::string(100000, 'y')}}), 2, {"yyy"}});
    // The largest int64: no overflow (UBSan) in checks or messages.
    const std::string max64 = "9223372036854775807";
    for (const char* flag : {"--layers", "--d-ff", "--vocab", "--seq-len", "--d-model", "--heads"})
      c.push_back({std::string("train_int64_max_") + (flag + 2), train_tiny({{flag, max64}}), 2,
                   {std::string(flag) + " " + max64, "beyond"}});
    // More slices than sequences: no multiple of the slices is the batch meant.
    c.push_back({"train_micro_batches_int64_max", train_tiny({{"--micro-batches", max64}}), 2,
                 {"--micro-batches " + max64 + " is more slices than the 16 sequences of --batch 16",
                  "give --micro-batches 16"}});
    for (const char* flag : {"--batch", "--eval-batch"})
      c.push_back({std::string("train_int64_max_") + (flag + 2), train_tiny({{flag, max64}}), 2, {flag}});
    c.push_back({"train_seq_len_too_short_for_analysis", train_tiny({{"--seq-len", "2"}}), 2, {"seq-len 2", "3"}});
    c.push_back({"train_data_seq_len_too_short_for_analysis",
                 train_tiny({{"--data", "{cfg:{\"tokens\": [1, 2]}}"}, {"--vocab", "8"}, {"--seq-len", "2"}}), 2,
                 {"seq-len 2", "3"}});
    // A seq-len of 6 does not make 1- and 2-token sequences analysable.
    c.push_back({"train_data_rows_too_short_for_analysis",
                 train_tiny({{"--data", "{cfg:{\"tokens\": [1], \"targets\": [0]}\n{\"tokens\": [1, 2]}}"},
                             {"--vocab", "8"}, {"--seq-len", "6"}}),
                 2, {"shorter than 3 tokens", ".json:2, has 2", "at least 3", "add lines of 3 tokens or more to"}});
    // Without --vocab and --seq-len the file is read for its sizes: a file that is not JSONL says so.
    c.push_back({"train_data_without_vocab", train_tiny({{"--data", "{file}"}}), 2,
                 {"notes.txt:1", "expected a JSON object", "JSONL"}});
    c.push_back({"train_data_with_task",
                 train_tiny({{"--data", "{file}"}, {"--task", "previous"}, {"--vocab", "8"}, {"--seq-len", "6"}}), 2,
                 {"--data", "--task previous", "give one of them"}});
    c.push_back({"top_level_option_typo", {"--verison"}, 2, {"unknown option --verison", "did you mean --version?"}});
    c.push_back({"top_level_training_flag_without_command", {"--steps", "5"}, 2, {"--steps comes after a command"}});
    c.push_back({"top_level_option_cut_short", {"--vers"}, 2, {"unknown option --vers", "did you mean --version?"}});
    c.push_back({"train_init_missing", with(train_tiny({}), {"--init", "{missing}"}), 2, {"{missing}"}});
    c.push_back({"train_init_is_a_folder", with(train_tiny({}), {"--init", "{dir}"}), 2, {"{dir}"}});
    c.push_back({"train_init_not_a_checkpoint", with(train_tiny({}), {"--init", "{file}"}), 2, {"notes.txt"}});
    // --init takes the model from the checkpoint (d_model 16, 2 causal heads):
    // a model flag that says otherwise names both values.
    c.push_back({"train_init_from_another_model", with(train_tiny({{"--d-model", "32"}}), {"--init", "{ck}"}), 2,
                 {"--d-model 32", "--d-model 16"}});
    c.push_back({"train_init_with_other_heads", with(train_tiny({{"--heads", "4"}}), {"--init", "{ck}"}), 2,
                 {"--heads 4", "--heads 2", "{ck}"}});
    c.push_back({"train_init_bidirectional", with(train_tiny({{"--bidirectional", ""}}), {"--init", "{ck}"}), 2,
                 {"--bidirectional true", "--bidirectional false"}});
    c.push_back({"train_init_config_with_other_layers",
                 with(train_tiny({}), {"--init", "{ck}", "--config", "{cfg:{\"layers\": 3}}"}), 2,
                 {"--layers 3", "--layers 1"}});
    // The finite training set and the optimizer's and model's options (issue 16).
    const std::vector<std::pair<std::string, std::string>> mod = {
        {"--task", "modular-addition"}, {"--vocab", "6"}, {"--seq-len", "3"}};  // p = 5: 25 pairs
    const auto mod_with = [&](std::vector<std::pair<std::string, std::string>> more) {
      more.insert(more.begin(), mod.begin(), mod.end());
      return train_tiny(more);
    };
    c.push_back({"train_fraction_one", mod_with({{"--train-fraction", "1"}}), 2, {"--train-fraction"}});
    c.push_back({"train_fraction_negative", mod_with({{"--train-fraction", "-0.3"}}), 2, {"--train-fraction"}});
    c.push_back({"train_fraction_nan", mod_with({{"--train-fraction", "nan"}}), 2, {"--train-fraction"}});
    c.push_back({"train_fraction_leaving_nothing_held_out", mod_with({{"--train-fraction", "0.99"}}), 2,
                 {"--train-fraction", "25 distinct examples"}});
    c.push_back({"train_size_beyond_the_pairs", mod_with({{"--train-size", "25"}}), 2,
                 {"--train-size 25", "--train-size 1 to 24"}});
    c.push_back({"train_fraction_of_an_unlisted_task", train_tiny({{"--train-fraction", "0.3"}}), 2,
                 {"--train-fraction", "first-prev-pair", "--train-size"}});
    c.push_back({"train_size_and_fraction", mod_with({{"--train-size", "5"}, {"--train-fraction", "0.3"}}), 2,
                 {"--train-size", "--train-fraction", "not both"}});
    c.push_back({"train_size_with_data", train_tiny({{"--data", "{file}"}, {"--vocab", "8"}, {"--seq-len", "6"},
                                                      {"--train-size", "4"}}),
                 2, {"--data", "--train-size"}});
    c.push_back({"train_size_beyond_32_bit_tokens", train_tiny({{"--train-size", "999999999999"}}), 2,
                 {"--train-size 999999999999", "2^31"}});
    // The whole set does not split: the hint names the flag given.
    c.push_back({"train_full_batch_of_a_fraction_in_slices",
                 mod_with({{"--train-fraction", "0.6"}, {"--batch", "full"}, {"--micro-batches", "4"}}), 2,
                 {"--batch full (15 sequences: the examples --train-fraction 0.6 keeps) does not split into 4 slices",
                  "give --micro-batches 3 or 5", "in place of --train-fraction a --train-size"}});
    c.push_back({"train_full_batch_of_a_size_in_slices",
                 mod_with({{"--train-size", "10"}, {"--batch", "full"}, {"--micro-batches", "4"}}), 2,
                 {"give --micro-batches 2 or 5, or --train-size a multiple of 4, such as 8 or 12"}});
    c.push_back({"train_full_batch_in_more_slices_than_sequences",
                 mod_with({{"--train-size", "10"}, {"--batch", "full"}, {"--micro-batches", "9223372036854775807"}}), 2,
                 {"does not split into 9223372036854775807 slices (--micro-batches, or one per process): give "
                  "--micro-batches 10"}});
    c.push_back({"train_full_batch_of_a_stream", train_tiny({{"--batch", "full"}}), 2,
                 {"--batch 0 (full)", "--train-size"}, {"--train-fraction"}});
    c.push_back({"train_full_batch_of_a_listable_stream", mod_with({{"--batch", "full"}}), 2,
                 {"--batch 0 (full)", "--train-size N (or --train-fraction F)"}});
    c.push_back({"train_batch_neither_number_nor_full", train_tiny({{"--batch", "half"}}), 2, {"--batch", "half"}});
    c.push_back({"train_eval_data_missing", train_tiny({{"--eval-data", "{missing}"}}), 2, {"{missing}"}});
    c.push_back({"train_eval_data_not_jsonl", train_tiny({{"--eval-data", "{file}"}}), 2, {"notes.txt:1", "JSON"}});
    c.push_back({"train_init_std_unknown_rule", train_tiny({{"--init-std", "xavier"}}), 2,
                 {"--init-std", "'xavier'", "fan-in"}});
    c.push_back({"train_init_std_with_init", with(train_tiny({{"--init-std", "fan-in"}}), {"--init", "{ck}"}), 2,
                 {"--init-std", "--init"}});
    c.push_back({"train_loss_dtype_f16", train_tiny({{"--loss-dtype", "f16"}}), 2, {"--loss-dtype", "'f16'"}});
    c.push_back({"train_split_seed_without_a_split", train_tiny({{"--split-seed", "3"}}), 2,
                 {"--split-seed", "--train-fraction"}});
    c.push_back({"train_betas_one_value", train_tiny({{"--betas", "0.9"}}), 2, {"--betas", "two numbers"}});
    c.push_back({"train_betas_three_values", train_tiny({{"--betas", "0.9,0.98,0.99"}}), 2, {"--betas"}});
    c.push_back({"train_beta_of_one", train_tiny({{"--betas", "0.9,1"}}), 2, {"--betas", "[0, 1)"}});
    c.push_back({"train_beta_negative", train_tiny({{"--betas", "-0.1,0.98"}}), 2, {"--betas"}});
    c.push_back({"train_betas_not_numbers", train_tiny({{"--betas", "a,b"}}), 2, {"--betas"}});
    c.push_back({"train_default_betas_with_sgd", train_tiny({{"--optimizer", "sgd"}, {"--betas", "0.9,0.999"}}), 2,
                 {"--betas is Adam's and AdamW's, but --optimizer sgd"}});
    c.push_back({"train_config_betas_not_a_list", with(train_tiny({}), {"--config", "{cfg:{\"betas\": 0.9}}"}), 2,
                 {"\"betas\" takes a list of numbers", "0.9"}});
    c.push_back({"train_eps_zero", train_tiny({{"--eps", "0"}}), 2, {"--eps"}});
    c.push_back({"train_eps_nan", train_tiny({{"--eps", "nan"}}), 2, {"--eps"}});
    c.push_back({"train_betas_with_sgd", train_tiny({{"--optimizer", "sgd"}, {"--betas", "0.9,0.98"}}), 2,
                 {"--betas", "sgd"}});
    c.push_back({"train_unknown_activation", train_tiny({{"--activation", "tanh"}}), 2, {"--activation", "tanh"}});
    c.push_back({"train_config_unknown_activation", with(train_tiny({}), {"--config", "{cfg:{\"activation\": \"swish\"}}"}),
                 2, {"--activation", "swish"}});
    c.push_back({"train_classes_of_another_task", train_tiny({{"--classes", "10"}}), 2,
                 {"--classes 10", "first-prev-pair", "64"}});
    c.push_back({"train_negative_classes", train_tiny({{"--classes", "-2"}}), 2, {"--classes", "-2"}});
    c.push_back({"train_resume_missing", {"train", "--resume", "{missing}"}, 2, {"--resume", "{missing}"}});
    c.push_back({"train_resume_folder_without_checkpoint", {"train", "--resume", "{dir}"}, 2, {"checkpoint"}});
    // Output locations.
    c.push_back({"train_out_holds_a_run", with({"train", "--out", "{run}"}, tiny()), 2, {"{run}", "--force"}});
    c.push_back({"train_out_is_a_file", with({"train", "--out", "{file}"}, tiny()), 2, {"{file}", "not a folder"}});
    c.push_back({"train_out_under_a_file", with({"train", "--out", "{file}/run"}, tiny()), 2, {"--out", "{file}/run"}});
    c.push_back({"train_out_in_proc", with({"train", "--out", "/proc/headlab-cli-test/run"}, tiny()), 2, {"--out"}});
    // --resume takes its settings from the run.
    for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
             {"--d-model", "32"}, {"--batch", "8"}, {"--task", "previous"}, {"--out", "{out}"}, {"--init", "{ck}"},
             {"--config", "{cfg:{}}"}, {"--precision", "bf16"}})
      c.push_back({"train_resume_with_" + flag.substr(2), {"train", "--resume", "{run}", flag, value}, 2, {flag}});
    c.push_back({"train_resume_with_force", {"train", "--resume", "{run}", "--force"}, 2, {"--force"}});
    c.push_back({"train_resume_below_steps_done", {"train", "--resume", "{run}", "--steps", "5"}, 2, {"--steps 5", "20"}});
    c.push_back({"train_resume_negative_steps", {"train", "--resume", "{run}", "--steps", "-1"}, 2, {"--steps"}});
    c.push_back({"train_resume_negative_lr", {"train", "--resume", "{run}", "--lr", "-1"}, 2, {"--lr"}});
    c.push_back({"train_resume_negative_threads", {"train", "--resume", "{run}", "--threads", "-2"}, 2, {"--threads"}});
    // The command line itself.
    c.push_back({"no_command", {}, 2, {"subcommand"}});
    c.push_back({"unknown_command", {"trian"}, 2, {"trian"}});
    c.push_back({"train_unknown_flag", with(train_tiny({}), {"--bogus"}), 2, {"--bogus"}});
    c.push_back({"train_stray_argument", with(train_tiny({}), {"stray"}), 2, {"headlab train: error:", "stray"}});
    c.push_back({"tasks_unknown_flag", {"tasks", "--bogus"}, 2, {"--bogus"}});
    c.push_back({"gradcheck_unknown_flag", {"gradcheck", "--bogus"}, 2, {"--bogus"}});
    c.push_back({"sweep_unknown_flag", {"sweep", "--bogus"}, 2, {"--bogus"}});
    c.push_back({"bench_unknown_flag", {"bench", "--bogus"}, 2, {"--bogus"}});
    c.push_back({"bench_full_batch_of_a_stream", {"bench", "--batch", "0"}, 2, {"--train-size"},
                 {"--train-fraction", "--data"}});
    c.push_back({"bench_zero_runs", {"bench", "--runs", "0"}, 2, {"--runs must be at least 1, got 0"}});
    c.push_back({"bench_zero_steps", {"bench", "--bench-steps", "0"}, 2, {"--bench-steps must be at least 1, got 0"}});
    c.push_back({"bench_negative_warmup", {"bench", "--warmup-steps", "-2"}, 2,
                 {"--warmup-steps must be 0 or more, got -2"}});
    // eval.
    c.push_back({"eval_without_checkpoint", {"eval"}, 2, {"checkpoint"}});
    c.push_back({"eval_missing_checkpoint", {"eval", "{missing}"}, 2, {"{missing}"}});
    c.push_back({"eval_text_file", {"eval", "{file}"}, 2, {"notes.txt"}});
    // Another file of the run folder given by mistake: not a checkpoint, and what is.
    c.push_back({"eval_config_json", {"eval", "{run}/config.json"}, 2,
                 {"{run}/config.json' is not a valid safetensors file", "checkpoint.safetensors"}});
    c.push_back({"eval_missing_checkpoint_names_the_file", {"eval", "{missing}"}, 2,
                 {"{missing}: no such run folder or checkpoint"}});
    c.push_back({"eval_folder_without_checkpoint", {"eval", "{dir}"}, 2,
                 {"{dir} is a folder without a checkpoint.safetensors", "give a run folder or a checkpoint file"}});
    c.push_back({"eval_negative_batch", {"eval", "{ck}", "--batch", "-1"}, 2, {"--batch", "-1"}});
    c.push_back({"eval_zero_batch", {"eval", "{ck}", "--batch", "0"}, 2, {"--batch", "0"}});
    c.push_back({"eval_non_numeric_batch", {"eval", "{ck}", "--batch", "many"}, 2, {"--batch", "many"}});
    c.push_back({"eval_batch_beyond_32_bit_tokens", {"eval", "{ck}", "--batch", "1000000000"}, 2, {"--batch"}});
    c.push_back({"eval_batch_beyond_memory", {"eval", "{ck}", "--batch", "300000000"}, 2, {"memory", "--batch"}});
    c.push_back({"eval_batch_int64_max", {"eval", "{ck}", "--batch", "9223372036854775807"}, 2, {"--batch"}});
    c.push_back({"analyze_batch_int64_max", {"analyze", "{run}", "--batch", "9223372036854775807"}, 2,
                 {"headlab analyze: error: --batch 9223372036854775807"}});
    c.push_back({"eval_big_file_that_is_no_checkpoint", {"eval", "{cfg:" + std::string(1 << 20, 'x') + "}"}, 2,
                 {"header length"}});
    c.push_back({"eval_missing_batch_value", {"eval", "{ck}", "--batch"}, 2, {"--batch"}});
    c.push_back({"eval_unknown_gemm", {"eval", "{ck}", "--gemm", "cublas"}, 2, {"--gemm", "cublas"}});
    c.push_back({"eval_unknown_precision", {"eval", "{ck}", "--precision", "f64"}, 2, {"--precision", "f64"}});
    c.push_back({"analyze_unknown_gemm", {"analyze", "{run}", "--gemm", "cublas"}, 2, {"--gemm", "cublas"}});
    c.push_back({"eval_negative_threads", {"eval", "{ck}", "--threads", "-1"}, 2, {"--threads"}});
    // A whole number beyond the flag's type is out of range, not "not a whole number" (QA25).
    c.push_back({"eval_threads_beyond_int", {"eval", "{ck}", "--threads", "99999999999"}, 2,
                 {"--threads", "from -2147483648 to 2147483647", "got 99999999999"}, {"not a whole number"}});
    c.push_back({"analyze_threads_beyond_int", {"analyze", "{run}", "--threads", "3000000000"}, 2,
                 {"--threads", "to 2147483647", "got 3000000000"}, {"not a whole number"}});
    // Beyond 64 bits CLI11 read the largest int64 and said another number than the one given.
    c.push_back({"analyze_step_beyond_int64", {"analyze", "{run}", "--step", "99999999999999999999"}, 2,
                 {"--step", "to 9223372036854775807", "got 99999999999999999999"}, {"--step 9223372036854775807"}});
    c.push_back({"analyze_example_beyond_int64", {"analyze", "{run}", "--example", "99999999999999999999"}, 2,
                 {"--example", "got 99999999999999999999"}, {"--example 9223372036854775807"}});
    c.push_back({"sweep_jobs_beyond_int", {"sweep", "--jobs", "5000000000"}, 2, {"--jobs", "got 5000000000"},
                 {"not a whole number"}});
    c.push_back({"bench_runs_beyond_int64", {"bench", "--runs", "99999999999999999999"}, 2,
                 {"--runs", "got 99999999999999999999"}});
    c.push_back({"gradcheck_filter_matching_nothing", {"gradcheck", "--filter", "no-such-op"}, 2,
                 {"--filter 'no-such-op'", "checks' names", "without --filter lists them"}});
    c.push_back({"eval_negative_seed", {"eval", "{ck}", "--seed", "-5"}, 2, {"--seed", "-5"}});
    c.push_back({"eval_unknown_task", {"eval", "{ck}", "--task", "nope"}, 2, {"nope"}});
    c.push_back({"eval_task_that_does_not_fit", {"eval", "{ck}", "--task", "modular-addition"}, 2,
                 {"modular-addition", "does not fit"}});
    c.push_back({"eval_task_and_data", {"eval", "{ck}", "--task", "previous", "--data", "{file}"}, 2,
                 {"--task", "--data"}});
    c.push_back({"eval_data_missing", {"eval", "{ck}", "--data", "{missing}"}, 2, {"{missing}"}});
    c.push_back({"eval_data_not_jsonl", {"eval", "{ck}", "--data", "{file}"}, 2, {"notes.txt:1"}});
    c.push_back({"eval_hooks_twice",
                 {"eval", "{ck}", "--dump-activations", "{out}.safetensors", "--hooks", "hook_embed,hook_pos_embed,hook_embed"}, 2,
                 {"hook_embed is listed twice"}});
    c.push_back({"eval_dump_under_a_file", {"eval", "{ck}", "--dump-logits", "{file}/logits.safetensors"}, 2,
                 {"{file}/logits.safetensors", "is not a folder"}});
    // analyze.
    c.push_back({"analyze_without_target", {"analyze"}, 2, {"target"}});
    c.push_back({"analyze_data_rows_too_short",
                 {"analyze", "{run}", "--data", "{cfg:{\"tokens\": [1], \"targets\": [0]}}", "--out", "{out}"}, 2,
                 {"--data", "shorter than 3 tokens", ".json:1, has 1"}});
    c.push_back({"analyze_bad_pattern", {"analyze", "{run}", "--pattern", "lag:1"}, 2, {"lag:1", "offset:K"}});
    c.push_back({"analyze_pattern_beyond_the_sequence", {"analyze", "{run}", "--pattern", "position:6"}, 2,
                 {"position:6", "beyond the 6 positions", "0 to 5"}});
    c.push_back({"analyze_missing_target", {"analyze", "{missing}"}, 2, {"{missing}"}});
    c.push_back({"analyze_text_file", {"analyze", "{file}"}, 2, {"notes.txt"}});
    c.push_back({"analyze_folder_without_checkpoint", {"analyze", "{dir}"}, 2, {"{dir}"}});
    c.push_back({"analyze_negative_batch", {"analyze", "{run}", "--batch", "-4"}, 2, {"--batch", "-4"}});
    c.push_back({"analyze_zero_batch", {"analyze", "{run}", "--batch", "0"}, 2, {"--batch", "0"}});
    c.push_back({"analyze_negative_example", {"analyze", "{run}", "--example", "-1"}, 2, {"--example", "-1"}});
    c.push_back({"analyze_example_beyond_batch", {"analyze", "{run}", "--example", "1000"}, 2, {"--example 1000"}});
    c.push_back({"analyze_non_numeric_threshold", {"analyze", "{run}", "--threshold", "high"}, 2, {"--threshold", "high"}});
    c.push_back({"analyze_threshold_above_one", {"analyze", "{run}", "--threshold", "2"}, 2, {"--threshold"}});
    c.push_back({"analyze_negative_threshold", {"analyze", "{run}", "--threshold", "-1"}, 2, {"--threshold"}});
    c.push_back({"analyze_nan_margin", {"analyze", "{run}", "--margin", "nan"}, 2, {"--margin", "nan"}});
    c.push_back({"analyze_diffuse_entropy_above_one", {"analyze", "{run}", "--diffuse-entropy", "5"}, 2,
                 {"--diffuse-entropy"}});
    c.push_back({"analyze_negative_sink_delta_loss", {"analyze", "{run}", "--sink-delta-loss", "-1"}, 2,
                 {"--sink-delta-loss"}});
    c.push_back({"analyze_infinite_sink_delta_loss", {"analyze", "{run}", "--sink-delta-loss", "inf"}, 2,
                 {"--sink-delta-loss must be 0 or more, got inf"}});
    c.push_back({"analyze_margin_above_one", {"analyze", "{run}", "--margin", "1.5"}, 2,
                 {"--margin must be between 0 and 1, got 1.5"}});
    c.push_back({"analyze_unknown_task", {"analyze", "{run}", "--task", "nope"}, 2, {"nope"}});
    c.push_back({"analyze_task_of_another_model", {"analyze", "{run}", "--task", "induction"}, 2, {"induction"}});
    c.push_back({"analyze_patch_with_one_sequence", {"analyze", "{run}", "--patch", "--batch", "1"}, 2,
                 {"--patch needs at least 2 sequences", "--batch 2"}});
    c.push_back({"analyze_data_patch_with_one_sequence",
                 {"analyze", "{run}", "--data", "{cfg:{\"tokens\": [1, 2, 3, 4]}}", "--out", "{out}", "--patch"}, 2,
                 {"--patch needs at least 2 sequences", "holds 1"}});
    c.push_back({"analyze_patch_given_a_value", {"analyze", "{run}", "--patch=maybe"}, 2, {"maybe"}});
    c.push_back({"analyze_patch_typo", {"analyze", "{run}", "--pach"}, 2, {"unknown flag --pach (did you mean --patch?)"}});
    c.push_back({"analyze_negative_threads", {"analyze", "{run}", "--threads", "-1"}, 2, {"--threads"}});
    c.push_back({"analyze_out_under_a_file", {"analyze", "{run}", "--out", "{file}/analysis"}, 2, {"--out"}});
    // A mistyped flag or config key names the nearest one ('_' for '-' counts as near).
    c.push_back({"train_flag_with_underscore", with(train_tiny({}), {"--d_model", "64"}), 2,
                 {"headlab train: error: unknown flag --d_model (did you mean --d-model?)"}});
    c.push_back({"train_flag_typo_with_value", with(train_tiny({}), {"--stpes=3"}), 2,
                 {"unknown flag --stpes (did you mean --steps?)"}});
    c.push_back({"sweep_flag_typo", {"sweep", "--seed_s", "3"}, 2, {"unknown flag --seed_s (did you mean --seeds?)"}});
    // train's flags that a sweep leaves out on purpose say so, not a near name (--threads: "--heads?").
    c.push_back({"sweep_threads", {"sweep", "--threads", "1", "--seeds", "0"}, 2,
                 {"--threads is not a sweep flag", "--jobs N"}});
    c.push_back({"sweep_quiet", {"sweep", "--quiet"}, 2, {"--quiet is not a sweep flag", "stdout.log"}});
    c.push_back({"eval_flag_typo", {"eval", "{ck}", "--bach", "3"}, 2, {"unknown flag --bach (did you mean --batch?)"}});
    c.push_back({"train_config_key_with_underscore", with(train_tiny({}), {"--config", "{cfg:{\"d_model\": 3}}"}), 2,
                 {"unknown key \"d_model\" (did you mean \"d-model\"?)"}});
    // An integer in another base than decimal, on every command's flags and in a sweep's lists alike.
    c.push_back({"train_hex_steps", train_tiny({{"--steps", "0x10"}}), 2,
                 {"--steps", "'0x10' is hexadecimal: write it in decimal, 16"}});
    c.push_back({"train_binary_seed", train_tiny({{"--seed", "0b11"}}), 2, {"--seed", "'0b11' is binary", "3"}});
    c.push_back({"sweep_hex_grid", {"sweep", "--d-model", "16,0x40"}, 2,
                 {"--d-model", "'0x40' is hexadecimal: write it in decimal, 64"}});
    c.push_back({"sweep_hex_seeds", {"sweep", "--seeds", "0-0x3"}, 2, {"--seeds", "'0x3' is hexadecimal"}});
    c.push_back({"sweep_octal_jobs", {"sweep", "--jobs", "0o10"}, 2, {"--jobs", "'0o10' is octal", "8"}});
    c.push_back({"eval_hex_batch", {"eval", "{ck}", "--batch", "0x4"}, 2, {"--batch", "'0x4' is hexadecimal"}});
    // A flag given twice (the tiny flags already hold --steps).
    c.push_back({"train_repeated_flag", with(train_tiny({}), {"--steps", "6"}), 2,
                 {"headlab train: error: --steps was given 2 times; give it once"}});
    return c;
  }();
  return all;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

class BadUsage : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadUsage, FailsWithOneClearLineAndWritesNothing) {
  const BadCase& c = GetParam();
  TempDir cwd, files;
  write_bytes(files / "notes.txt", "these are notes, not JSON\n");
  fs::create_directory(files / "folder");
  write_bytes(files / "folder/readme", "a folder that holds no run\n");
  int configs = 0;
  std::vector<std::string> args = c.args;
  bool wants_run = false;
  for (std::string& a : args) {
    // {cfg:TEXT}: a config file holding TEXT.
    if (a.starts_with("{cfg:")) {
      const std::string path = files / ("config" + std::to_string(configs++) + ".json");
      write_bytes(path, a.substr(5, a.size() - 6));
      a = path;
    }
    wants_run = wants_run || a.find("{run}") != std::string::npos || a.find("{ck}") != std::string::npos;
  }
  if (wants_run) copy_dir(shared_run(), files / "run");
  std::vector<std::string> mentions = c.mentions;
  for (auto* list : {&args, &mentions})
    for (std::string& a : *list) {
      replace_all(a, "{out}", cwd / "out");
      replace_all(a, "{run}", files / "run");
      replace_all(a, "{ck}", files / "run/checkpoint.safetensors");
      replace_all(a, "{file}", files / "notes.txt");
      replace_all(a, "{dir}", files / "folder");
      replace_all(a, "{missing}", files / "missing");
      if (a == "''") a.clear();
    }
  const auto before = snapshot(files.path());

  const RunResult r = run_headlab(args, cwd.path());

  EXPECT_TRUE(clean_failure(r, c.status, mentions));
  for (const std::string& advice : c.absent) EXPECT_EQ(r.err.find(advice), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 2000u) << "an error line quotes a value at most in part";
  EXPECT_EQ(r.out, "") << "a failed command prints nothing on stdout";
  EXPECT_TRUE(is_empty_dir(cwd.path())) << "the working folder (and --out " << cwd / "out" << ") must stay empty";
  EXPECT_EQ(snapshot(files.path()), before) << "the files the command read must stay as they were";
}

INSTANTIATE_TEST_SUITE_P(Cli, BadUsage, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<BadCase>& p) {
                           std::string name = p.param.name;  // flag names have dashes, test names cannot
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// On a CPU without bf16 units, --precision bf16 is refused before anything
// runs, saying why and what to use instead. HEADLAB_NO_CPU_BF16=1 makes any
// CPU look like one (core::cpu_has_native_bf16); the child inherits it.
TEST(Bf16Refusal, WithoutBf16UnitsEveryCommandRefusesBf16NamingF32) {
  TempDir cwd;
  ::setenv("HEADLAB_NO_CPU_BF16", "1", 1);
  const std::vector<std::vector<std::string>> commands = {
      train_command(cwd / "out", {{"--precision", "bf16"}}),
      {"bench", "--precision", "bf16", "--bench-steps", "1", "--runs", "1", "--warmup-steps", "0"},
      {"eval", shared_run(), "--precision", "bf16"},
      {"sweep", "--precision", "bf16", "--seeds", "0", "--steps", "2", "--out", cwd / "sweep"}};
  for (const std::vector<std::string>& args : commands) {
    const RunResult r = run_headlab(args, cwd.path());
    EXPECT_TRUE(clean_failure(r, 2, {"--precision bf16", "no bf16 units", "use --precision f32"})) << args[0];
    EXPECT_EQ(r.out, "") << args[0];
  }
  // HEADLAB_PRECISION=bf16 makes bf16 the default: refused the same way,
  // naming the variable; so is a value that is no precision.
  const char* saved = std::getenv("HEADLAB_PRECISION");
  const std::string previous = saved ? saved : "";
  ::setenv("HEADLAB_PRECISION", "bf16", 1);
  const RunResult by_default = run_headlab(train_command(cwd / "out", {}), cwd.path());
  EXPECT_TRUE(clean_failure(by_default, 2, {"--precision bf16", "no bf16 units", "HEADLAB_PRECISION"}));
  ::unsetenv("HEADLAB_NO_CPU_BF16");
  ::setenv("HEADLAB_PRECISION", "fp8", 1);
  const RunResult bad = run_headlab(train_command(cwd / "out", {}), cwd.path());
  EXPECT_TRUE(clean_failure(bad, 2, {"--precision must be f32 or bf16, got 'fp8'", "HEADLAB_PRECISION"}));
  if (saved)
    ::setenv("HEADLAB_PRECISION", previous.c_str(), 1);
  else
    ::unsetenv("HEADLAB_PRECISION");
  EXPECT_TRUE(is_empty_dir(cwd.path()));
  // And f32 runs there as ever.
  ::setenv("HEADLAB_NO_CPU_BF16", "1", 1);
  const RunResult f32 = run_headlab(train_command(cwd / "out", {{"--precision", "f32"}, {"--steps", "2"}}), cwd.path());
  ::unsetenv("HEADLAB_NO_CPU_BF16");
  EXPECT_EQ(f32.exit_code, 0) << f32.describe();
}

// Under mpirun only rank 0 says a usage error. A launcher's variable left in
// the environment (exported by hand, inherited from a job) must not silence
// one in a process that is alone: the error is said, once, with exit 2.
TEST(StaleLauncherVariables, UsageErrorsAreStillSaid) {
  TempDir cwd;
  struct Case {
    std::vector<std::pair<const char*, const char*>> env;
    std::vector<std::string> args;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {{{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}},
       {"train", "--d_model", "5"},
       {"headlab train: error: unknown flag --d_model (did you mean --d-model?)"}},
      {{{"PMI_RANK", "1"}}, {"trian"}, {"headlab: error: unknown command 'trian'"}},
      {{{"PMIX_RANK", "1"}}, {"--verison"}, {"unknown option --verison"}},
  };
  // Open MPI keeps allocations until exit that LeakSanitizer cannot attribute.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string saved_asan = asan ? asan : "";
  ::setenv("ASAN_OPTIONS", (saved_asan.empty() ? "detect_leaks=0" : saved_asan + ":detect_leaks=0").c_str(), 1);
  for (const Case& c : cases) {
    for (const auto& [name, value] : c.env) ::setenv(name, value, 1);
    const RunResult r = run_headlab(c.args, cwd.path(), 60);
    for (const auto& [name, value] : c.env) ::unsetenv(name);
    EXPECT_TRUE(clean_failure(r, 2, c.mentions)) << c.args[0];
  }
  if (asan)
    ::setenv("ASAN_OPTIONS", saved_asan.c_str(), 1);
  else
    ::unsetenv("ASAN_OPTIONS");
  EXPECT_TRUE(is_empty_dir(cwd.path()));
}

// Leading zeros are decimal, as in a sweep's lists: --steps 010 is 10 steps
// (the parser underneath, strtoll's base 0, read 8).
TEST(DecimalIntegers, LeadingZerosAreDecimal) {
  TempDir cwd;
  const RunResult r = run_headlab(train_command(cwd / "run", {{"--steps", "010"}}), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string config = read_bytes(cwd / "run/config.json");
  EXPECT_NE(config.find("\"steps\": 10,"), std::string::npos) << config;
}

TEST(Help, EverySubcommandHasHelpThatExitsZero) {
  TempDir cwd;
  for (const char* command : {"train", "eval", "analyze", "sweep", "bench", "tasks", "gradcheck"}) {
    const RunResult r = run_headlab({command, "--help"}, cwd.path());
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.describe();
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << command << ": " << r.describe();
    EXPECT_EQ(r.err, "") << command;
  }
  EXPECT_TRUE(is_empty_dir(cwd.path()));
}

}  // namespace
}  // namespace headlab::cli_test
