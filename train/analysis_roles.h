// Which patterns an analysis expects as roles, when the user says otherwise
// than the input (a data file's "attend" patterns, a task's roles):
// --scored-only NAME makes an expected "attend" pattern a hypothesis that is
// scored but no role, --expect NAME makes a built-in pattern, a --pattern or a
// scored-only "attend" pattern a role, called by its name. `headlab analyze`
// takes both flags; `train` and `sweep` too (TrainConfig's expect and
// scored_only), for every analysis of the run's evaluation batch (Session
// changes its roles), which `analyze RUN` then reads the same. As
// headlab.analyze's `roles=` says either from Python (docs/python.md).
#pragma once

#include <string>
#include <vector>

#include "train/tasks.h"

namespace headlab::train {

// By pattern name.
struct RoleChanges {
  std::vector<std::string> scored_only, expect;
};

// `rows`' roles less those of the scored-only patterns, plus one per
// expected pattern, called by its name (as a data file's roles are).
void change_roles(Batch& rows, const RoleChanges& changes);

// Each --scored-only NAME must be an "attend" pattern of the rows (`row`, one
// of them, with the --pattern's: every pattern of a file is on each) that an
// expected role names, and each --expect NAME a built-in pattern or one of
// the rows' that none names yet: anything else would change nothing, or
// nothing the user meant. Named once each, and not by both flags.
// UsageError naming the flag, the name and what would fit; `source` names
// the rows ("--data FILE").
void check_role_changes(const RoleChanges& changes, const Batch& row, const std::string& source);

}  // namespace headlab::train
