// The frame shared by headlab's self-contained pages, report.html and
// sweep.html: one file with inline CSS and JS (the files of analysis/report/,
// embedded at build time), no fonts, scripts or images from anywhere. The data
// reach the page as one JSON document inside <script type="application/json"
// id="headlab-data"> whose '<', '>' and '&' are \u-escaped; the shared script
// page.js and then the page's own script build the DOM from it with
// textContent, so no string from a run is ever parsed as HTML.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace headlab::analysis {

// &, <, >, " and ' as character references, for text and attribute values.
std::string html_escape(std::string_view text);

// JSON that is safe inside <script type="application/json">: no '<', '>' or
// '&' (so no "</script>" or "<!--"), invalid UTF-8 replaced instead of throwing.
std::string script_json(const nlohmann::json& data);
std::string script_json(const nlohmann::ordered_json& data);

// The pattern table as the pages' scripts use it, in its order:
// [{"key", "name", "short_name", "colour", "definition"}].
nlohmann::json patterns_json();

// A whole page: `title`, the stylesheet `css`, `noscript_html` (markup, already
// escaped) for readers without JavaScript, the data (the output of
// script_json), page.js, then `script`.
std::string html_page(std::string_view title, std::string_view css, std::string_view noscript_html,
                      std::string_view data_json, std::string_view script);

}  // namespace headlab::analysis
