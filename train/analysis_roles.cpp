// Which patterns an analysis expects as roles (analysis_roles.h).
#include "train/analysis_roles.h"

#include <algorithm>

#include "analysis/attend.h"
#include "analysis/patterns.h"
#include "train/errors.h"

namespace headlab::train {

namespace {

// "'a', 'b'" of `names`, or "none".
std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out.empty() ? "none" : out;
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void check_once(const std::vector<std::string>& names, const std::string& flag) {
  for (auto it = names.begin(); it != names.end(); ++it)
    if (std::find(names.begin(), it, *it) != it) throw UsageError(flag + " " + *it + " is given twice");
}

}  // namespace

void change_roles(Batch& rows, const RoleChanges& changes) {
  std::erase_if(rows.roles,
                [&changes](const analysis::ExpectedRole& r) { return has(changes.scored_only, r.pattern); });
  for (const std::string& name : changes.expect) rows.roles.push_back({name, name});
}

void check_role_changes(const RoleChanges& changes, const Batch& row, const std::string& source) {
  std::vector<std::string> roles, expected, others;
  for (const analysis::ExpectedRole& r : row.roles) roles.push_back(r.pattern);
  for (const analysis::AttendPattern& p : row.attend) (has(roles, p.name) ? expected : others).push_back(p.name);
  check_once(changes.scored_only, "--scored-only");
  check_once(changes.expect, "--expect");
  for (const std::string& name : changes.scored_only) {
    if (has(changes.expect, name))
      throw UsageError("--scored-only " + name + " and --expect " + name + " say opposite things; give one");
    if (!has(expected, name))
      throw UsageError("--scored-only " + name + " is no \"attend\" pattern that " + source +
                              " expects as a role; those are " + quoted_list(expected));
  }
  for (const std::string& name : changes.expect) {
    if (has(roles, name)) throw UsageError("--expect " + name + ": " + source + " expects it already");
    if (!analysis::is_pattern_name(name) && !has(others, name)) {
      std::vector<std::string> known;
      for (const analysis::Pattern& p : analysis::kPatterns) known.emplace_back(p.name);
      known.insert(known.end(), others.begin(), others.end());
      throw UsageError("--expect " + name + " is no pattern of the analysis; give one of " +
                              quoted_list(known) + " (a --pattern offset:K is one once given)");
    }
  }
}

}  // namespace headlab::train
