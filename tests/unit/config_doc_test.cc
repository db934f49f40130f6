// docs/configuration.md must equal what the variable table renders.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "env/config.h"

namespace {

constexpr const char* kDocPath = RAILYARD_SOURCE_DIR "/docs/configuration.md";

TEST(ConfigDoc, CommittedDocMatchesTable) {
  const std::string rendered = railyard::env::RenderMarkdown();
  if (const char* update = std::getenv("RAILYARD_UPDATE_DOCS"); update && std::string(update) == "1") {
    std::ofstream out(kDocPath, std::ios::binary | std::ios::trunc);
    out << rendered;
    out.close();
    ASSERT_TRUE(out.good()) << "cannot write " << kDocPath;
  }
  std::ifstream in(kDocPath, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing " << kDocPath;
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(committed.str(), rendered)
      << "docs/configuration.md is out of date with env/variables.cc. Regenerate it with\n"
         "  cmake --build <build> --target railyard-config-doc && "
         "<build>/tools/railyard-config-doc/railyard-config-doc docs/configuration.md\n"
         "or  RAILYARD_UPDATE_DOCS=1 <build>/tests/unit/config_doc_test\n"
         "and commit the result.";
}

TEST(ConfigDoc, EveryVariableIsDocumented) {
  const std::string rendered = railyard::env::RenderMarkdown();
  for (const auto& var : railyard::env::Variables()) {
    EXPECT_NE(rendered.find(std::string("`") + var.name + "`"), std::string::npos) << var.name;
  }
  EXPECT_NE(rendered.find("| `RAILYARD_CHUNK_BYTES` | bytes | `8388608` (8M) | bytes | "
                          "4096..1073741824 (4K..1G) |"),
            std::string::npos)
      << rendered;
}

}  // namespace
