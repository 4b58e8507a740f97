// Every file is built with base/json_assert.hpp ahead of nlohmann::json (the precompiled header's
// first part, or forced in): a read of a value that is not there throws instead of aborting.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdexcept>

TEST(JsonAssert, ReadingAKeyThatIsNotThereThrows)
{
    const nlohmann::json object = nlohmann::json::object();
    EXPECT_THROW(static_cast<void>(object["missing"]), std::out_of_range);
}
