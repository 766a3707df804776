// The one authentication policy both front doors use.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/api_key.h"

namespace flashserve {
namespace {

TEST(ApiKey, BearerKeyOnly) {
  const ApiKey key("s3cret");
  EXPECT_TRUE(key.required());
  EXPECT_TRUE(key.accepts("Bearer s3cret"));
  EXPECT_TRUE(key.accepts("bearer s3cret"));  // the scheme is case-insensitive (RFC 9110)
  EXPECT_FALSE(key.accepts("Bearer s3cre"));
  EXPECT_FALSE(key.accepts("Bearer s3cret "));
  EXPECT_FALSE(key.accepts("Bearer s3cretX"));
  EXPECT_FALSE(key.accepts("Basic s3cret"));
  EXPECT_FALSE(key.accepts("s3cret"));
  EXPECT_FALSE(key.accepts(""));
}

// Anthropic's clients send the key alone (x-api-key).
TEST(ApiKey, BareKey) {
  const ApiKey key("s3cret");
  EXPECT_TRUE(key.accepts_key("s3cret"));
  EXPECT_FALSE(key.accepts_key("Bearer s3cret"));
  EXPECT_FALSE(key.accepts_key("s3cre"));
  EXPECT_FALSE(key.accepts_key("s3cret "));
  EXPECT_FALSE(key.accepts_key(""));
}

TEST(ApiKey, NoKeyMeansOpen) {
  const ApiKey open;
  EXPECT_FALSE(open.required());
  EXPECT_TRUE(open.accepts(""));
  EXPECT_TRUE(open.accepts_key(""));
  EXPECT_THROW(ApiKey(""), std::invalid_argument);
}

TEST(ApiKey, FromFlagOrFile) {
  const auto path = std::filesystem::temp_directory_path() / ("flashserve-key-" + std::to_string(::getpid()));
  std::ofstream(path) << "from-file \r\nsecond line is ignored\n";
  const ApiKey from_file = ApiKey::from_flags("", path.string());
  EXPECT_TRUE(from_file.accepts("Bearer from-file"));
  EXPECT_TRUE(ApiKey::from_flags("flag", "").accepts("Bearer flag"));
  EXPECT_FALSE(ApiKey::from_flags("", "").required());
  EXPECT_THROW(ApiKey::from_flags("flag", path.string()), std::invalid_argument);
  std::ofstream(path) << "\n";
  EXPECT_THROW(ApiKey::from_flags("", path.string()), std::invalid_argument);
  EXPECT_THROW(ApiKey::from_flags("", path.string() + "-missing"), std::invalid_argument);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace flashserve
