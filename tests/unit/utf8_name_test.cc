// Names from peers and operators: UTF-8 validation, cutting at character
// boundaries, and JSON output that never throws (issue 9.3).
#include "topology/utf8_name.h"

#include <gtest/gtest.h>

#include <string>

#include "topology/cluster_graph.h"
#include "topology/graph_json.h"

namespace railyard::topology {
namespace {

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(Utf8Name, ValidatesShortestFormOnly) {
  EXPECT_TRUE(IsValidUtf8("h0"));
  EXPECT_TRUE(IsValidUtf8("r\xC3\xA9seau"));         // réseau
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x9A\x82"));       // U+1F682
  EXPECT_FALSE(IsValidUtf8("\xC3"));                  // truncated
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));              // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));          // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));      // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(Utf8Name, SixteenTwoByteCharactersCutAt31BytesKeepFifteen) {
  const std::string name = Repeat("\xC3\xA9", 16);  // 16 x é = 32 bytes
  const std::string cut = CutUtf8(name, kMaxHostNameBytes);
  EXPECT_EQ(cut.size(), 30u);
  EXPECT_EQ(cut, Repeat("\xC3\xA9", 15));
  EXPECT_TRUE(IsValidUtf8(cut));
  EXPECT_EQ(CutUtf8("abc", 31), "abc");
  EXPECT_EQ(CutUtf8("\xF0\x9F\x9A\x82", 3), "");
}

TEST(Utf8Name, SanitizeReplacesInvalidBytesAndControls) {
  EXPECT_EQ(SanitizeName("h\xFF\xFE" "1", 31), "h??1");
  EXPECT_EQ(SanitizeName("a\nb\x1b[31m", 31), "a?b?[31m");
  EXPECT_EQ(SanitizeName("\xC3" "x", 31), "?x");  // a lead byte without its continuation
  // C1 controls (a terminal's CSI is U+009B, C2 9B) become '?'; U+00A0 onwards stays.
  EXPECT_EQ(SanitizeName("a\xC2\x9B" "31m\xC2\x80" "b\xC2\xA0" "c", 31), "a?31m?b\xC2\xA0" "c");
  EXPECT_EQ(SanitizeName("\x9B" "x", 31), "?x");  // the raw byte is no UTF-8 at all
  const std::string s = SanitizeName(Repeat("\xC3\xA9", 16), 31);
  EXPECT_EQ(s.size(), 30u);
  EXPECT_TRUE(IsValidUtf8(s));
}

TEST(Utf8Name, LocalNameIsCheckedAndCut) {
  std::string out;
  bool truncated = true;
  ASSERT_TRUE(CheckLocalName("h1", "--host-name", &out, &truncated).ok());
  EXPECT_EQ(out, "h1");
  EXPECT_FALSE(truncated);
  ASSERT_TRUE(CheckLocalName(Repeat("\xC3\xA9", 16), "--host-name", &out, &truncated).ok());
  EXPECT_EQ(out, Repeat("\xC3\xA9", 15));
  EXPECT_TRUE(truncated);
  const Status bad = CheckLocalName("h\xFF", "RAILYARD_HOST_NAME", &out, &truncated);
  EXPECT_EQ(bad.code(), Code::kInvalidUsage);
  EXPECT_NE(bad.message().find("RAILYARD_HOST_NAME"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("UTF-8"), std::string::npos) << bad.message();
  EXPECT_EQ(CheckLocalName("a\tb", "--host-name", &out, &truncated).code(), Code::kInvalidUsage);
}

TEST(GraphJson, DumpJsonNeverThrowsOnANameThatIsNotUtf8) {
  ClusterGraph g;
  g.AddHost(1, "h0");
  g.AddHost(2, "bad\xFF\xC3");  // what a v1 peer could put in its record
  g.AddLink({1, "p0", "10.0.0.1", 10000}, {2, "p1", "10.0.0.2", 10000});
  const nlohmann::json j = GraphToJson(g, 1);
  EXPECT_THROW((void)j.dump(2), nlohmann::json::type_error);  // what killed railyardd (type_error.316)
  std::string text;
  ASSERT_NO_THROW(text = DumpJson(j, 2));
  EXPECT_NE(text.find("bad\xEF\xBF\xBD\xEF\xBF\xBD"), std::string::npos) << text;  // U+FFFD twice
  nlohmann::json back;
  EXPECT_NO_THROW(back = nlohmann::json::parse(text));
  EXPECT_EQ(back["hosts"].size(), 2u);
}

// A host the graph knows but cannot reach (its cable's far side not heard yet) is said
// to be unreachable in the JSON too, not only as a 0-hop route (new-user trial).
TEST(GraphJson, AHostWithNoPathIsMarkedUnreachable) {
  ClusterGraph g;
  g.AddHost(1, "h0");
  g.AddHost(2, "h1");
  g.AddHost(3, "h3");  // known (e.g. from a neighbour's record) but with no link
  g.AddLink({1, "p0", "10.0.0.1", 10000}, {2, "p1", "10.0.0.2", 10000});
  const nlohmann::json j = GraphToJson(g, 1);
  int seen = 0;
  for (const auto& r : j["routes"]) {
    if (r["name"] == "h1") {
      EXPECT_EQ(r["hops"], 1);
      EXPECT_EQ(r["reachable"], true);
      ++seen;
    } else if (r["name"] == "h3") {
      EXPECT_EQ(r["hops"], 0);
      EXPECT_EQ(r["reachable"], false);
      EXPECT_TRUE(r["next_hops"].empty());
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2) << j.dump(2);
}

}  // namespace
}  // namespace railyard::topology
