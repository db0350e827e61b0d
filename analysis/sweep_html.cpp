#include "analysis/sweep_html.h"

#include <cstdio>

#include "analysis/html_page.h"
#include "analysis/report_assets.h"

namespace headlab::analysis {
namespace {

// " (95% CI 40-89%)" from c[key] = [lo, hi]; "" when it is not such a pair.
std::string interval_text(const nlohmann::ordered_json& c, const char* key) {
  const auto ci = c.find(key);
  if (ci == c.end() || !ci->is_array() || ci->size() != 2 || !(*ci)[0].is_number() || !(*ci)[1].is_number()) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, " (95%% CI %.0f-%.0f%%)", 100 * (*ci)[0].get<double>(), 100 * (*ci)[1].get<double>());
  return buf;
}

// "h2: 7 of 10 runs specialized (95% CI 40-89%); 9 of 10 found the expected
// roles (95% CI 60-98%)" ("layers 2, lr 0.001, h2: ..." in a grid), from a
// configs[] entry, for readers without JavaScript; "h2: none finished" for a
// configuration without a finished run. Missing keys read as nothing.
std::string config_line(const nlohmann::ordered_json& c) {
  const auto count = [&](const char* key) {
    const auto it = c.find(key);
    return it != c.end() && it->is_number_integer() ? it->get<long long>() : 0LL;
  };
  const auto name = c.find("name");
  const std::string config =
      name != c.end() && name->is_string() ? name->get<std::string>() : "h" + std::to_string(count("heads"));
  if (c.contains("runs") && count("runs") == 0) return config + ": none finished";  // no rate to state
  std::string line = config + ": " + std::to_string(count("specialized")) + " of " + std::to_string(count("runs")) +
                     " runs specialized";
  line += interval_text(c, "specialized_ci");
  // A sweep.json from before the roles' rate has no "runs_expecting_roles": nothing said.
  const auto expecting = c.find("runs_expecting_roles");
  if (expecting != c.end() && expecting->is_number_integer()) {
    if (expecting->get<long long>() == 0)
      line += "; found the expected roles: n/a (none expected)";
    else
      line += "; " + std::to_string(count("roles_found")) + " of " + std::to_string(expecting->get<long long>()) +
              " found the expected roles" + interval_text(c, "roles_found_ci");
  }
  return line;
}

}  // namespace

std::string sweep_html(const nlohmann::ordered_json& sweep, std::string_view title) {
  std::string noscript = "<h1>" + html_escape(title) + "</h1>\n<ul>\n";
  const auto configs = sweep.find("configs");
  if (configs != sweep.end() && configs->is_array())
    for (const auto& c : *configs)
      if (c.is_object()) noscript += "<li>" + html_escape(config_line(c)) + "</li>\n";
  noscript += "</ul>\n";
  nlohmann::ordered_json data = {{"title", title}, {"patterns", patterns_json()}, {"sweep", sweep}};
  const std::string css = std::string(kReportCss) + std::string(kSweepCss);
  return html_page(title, css, noscript, script_json(data), kSweepJs);
}

}  // namespace headlab::analysis
