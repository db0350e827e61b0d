#include "analysis/html_page.h"

#include "analysis/patterns.h"
#include "analysis/report_assets.h"

namespace headlab::analysis {
namespace {

template <class Json>
std::string escaped_json(const Json& data) {
  const std::string raw = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(raw.size());
  for (char c : raw) {
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string script_json(const nlohmann::json& data) { return escaped_json(data); }
std::string script_json(const nlohmann::ordered_json& data) { return escaped_json(data); }

nlohmann::json patterns_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const Pattern& p : kPatterns)
    out.push_back({{"key", pattern_key(p)},
                   {"name", p.name},
                   {"short_name", p.short_name},
                   {"colour", p.html_colour},
                   {"definition", p.definition}});
  return out;
}

std::string html_page(std::string_view title, std::string_view css, std::string_view noscript_html,
                      std::string_view data_json, std::string_view script) {
  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + html_escape(title) + "</title>\n<style>\n";
  html += css;
  html += "</style>\n</head>\n<body>\n<main id=\"app\">\n<noscript><div class=\"noscript\">\n";
  html += noscript_html;
  html += "<p>The charts of this page are drawn by JavaScript.</p>\n</div></noscript>\n</main>\n";
  html += "<script type=\"application/json\" id=\"headlab-data\">";
  html += data_json;
  html += "</script>\n<script>\n";
  html += kPageJs;
  html += "</script>\n<script>\n";
  html += script;
  html += "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace headlab::analysis
