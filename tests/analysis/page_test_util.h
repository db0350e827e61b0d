// Reading headlab's self-contained pages (report.html, sweep.html) in tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

namespace headlab::analysis {

// The JSON document the page reads.
inline nlohmann::json page_data_of(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"headlab-data\">";
  const auto begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  const auto start = begin + open.size();
  return nlohmann::json::parse(html.substr(start, html.find("</script>", start) - start));
}

inline std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A whole page that needs nothing from anywhere: no address, no external
// script, stylesheet, import or url(); its three scripts (the data, page.js
// and the page's own) inline.
inline void expect_self_contained(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(count(html, "<script"), 3u);
}

}  // namespace headlab::analysis
