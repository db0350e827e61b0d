#include "analysis/sweep_html.h"

#include <cstdio>

#include "analysis/html_page.h"
#include "analysis/report_assets.h"

namespace headlab::analysis {
namespace {

// "h2: 7 of 10 runs specialized (95% CI 40-89%)" ("layers 2, lr 0.001, h2: ..."
// in a grid), from a configs[] entry, for readers without JavaScript. Missing
// keys read as nothing.
std::string config_line(const nlohmann::ordered_json& c) {
  const auto count = [&](const char* key) {
    const auto it = c.find(key);
    return it != c.end() && it->is_number_integer() ? it->get<long long>() : 0LL;
  };
  const auto name = c.find("name");
  std::string line = (name != c.end() && name->is_string() ? name->get<std::string>() : "h" + std::to_string(count("heads"))) +
                     ": " + std::to_string(count("specialized")) + " of " +
                     std::to_string(count("runs")) + " runs specialized";
  const auto ci = c.find("specialized_ci");
  if (ci != c.end() && ci->is_array() && ci->size() == 2 && (*ci)[0].is_number() && (*ci)[1].is_number()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " (95%% CI %.0f-%.0f%%)", 100 * (*ci)[0].get<double>(), 100 * (*ci)[1].get<double>());
    line += buf;
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
