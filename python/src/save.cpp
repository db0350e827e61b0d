// Model.save: the model as a checkpoint that headlab.load, `headlab analyze`
// and `headlab eval` read, with its source's metadata (config, task, step,
// data file, optimizer state) and the record of where its weights came from
// ("edited"). An output never replaces an input: the path is checked before
// anything is written, and the file is written atomically.
#include <pybind11/pybind11.h>

#include <sys/stat.h>

#include <filesystem>

#include "core/atomic_file.h"
#include "model.h"
#include "train/checkpoint.h"
#include "train/run_folder.h"

namespace headlab::python {

namespace {

namespace fs = std::filesystem;

// The folder a checkpoint's analysis writes into (`headlab analyze FILE`
// puts heads.json and report.html beside FILE) must not be a run's or a
// sweep's, whose files belong to their own model; a run's snapshots/ folder
// holds only that run's snapshots.
void check_folder(const std::string& path, const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    raise(PyExc_FileNotFoundError, "save: " + path + ": the folder " + folder.string() +
                                       (fs::exists(folder, ec) ? " is not a folder" : " does not exist; create it first"));
  const std::string kind = train::folder_marker(folder.string());
  const bool sweep = kind == "sweep" || fs::exists(folder / "sweep.json", ec);
  const bool run = kind == "run" || fs::exists(folder / "checkpoint.safetensors", ec);
  const bool snapshots = folder.filename() == "snapshots" &&
                         (train::folder_marker(folder.parent_path().string()) == "run" ||
                          fs::exists(folder.parent_path() / "checkpoint.safetensors", ec));
  if (sweep || run || snapshots)
    raise(PyExc_ValueError,
          "save: " + path + " is inside the " + (sweep ? "sweep" : "run") + " folder " +
              (snapshots ? folder.parent_path() : folder).string() +
              ", whose files are its own run's (`headlab analyze` of a checkpoint writes heads.json and report.html "
              "beside it); save into a folder of your own");
}

void check_save_path(const Model& model, const std::string& path, bool overwrite) {
  if (path.empty()) raise(PyExc_ValueError, "save: the path is empty; give a file name such as edited.safetensors");
  std::error_code ec;
  const fs::path out = fs::absolute(path, ec).lexically_normal();
  const std::string& source = model.source->path;
  // By name too: the source may have been replaced by a newer file since it was read.
  if (out == fs::path(source) || fs::equivalent(out, source, ec))
    raise(PyExc_ValueError, "save: " + path + " is the checkpoint this model was read from (" + source +
                                "); an edit never replaces its source: save it to a new file");
  struct stat info {};
  if (::lstat(out.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode))
      raise(PyExc_IsADirectoryError, "save: " + path + " is a folder; give a file name such as " +
                                         (fs::path(path) / "edited.safetensors").string());
    try {
      core::check_output_path(out.string());  // a link, a FIFO, a device
    } catch (const std::runtime_error& e) {
      raise(PyExc_ValueError, std::string("save: ") + e.what());
    }
    if (!overwrite)
      raise(PyExc_FileExistsError, "save: " + path + " exists; pass overwrite=True to replace it");
  }
  check_folder(path, out.parent_path());
}

void save(const Model& model, const std::string& path, bool overwrite) {
  check_save_path(model, path, overwrite);
  train::CheckpointInfo info = model.source->info;
  // The trainer's sums since its last log line belong to the source's run
  // folder (--resume checks them against its metrics.jsonl), not to this file.
  info.trainer = nullptr;
  info.edited = edited_record(model);
  py::gil_scoped_release release;
  train::save_checkpoint(path, *model.transformer, model.source->optimizer, info);
}

}  // namespace

void bind_save(py::class_<Model>& model) {
  model.def("save", &save, py::arg("path"), py::arg("overwrite") = false);
}

}  // namespace headlab::python
