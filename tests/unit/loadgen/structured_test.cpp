// --structured-fraction: which requests carry a schema, and the response_format they carry.
#include <gtest/gtest.h>

#include "loadgen/client.h"

using namespace tmill::loadgen;

TEST(StructuredLoad, FractionIsSpreadEvenly) {
  for (double f : {0.0, 0.25, 0.5, 1.0}) {
    int n = 0;
    for (size_t i = 0; i < 16; ++i) n += structured_request(i, f);
    EXPECT_EQ(n, static_cast<int>(16 * f)) << f;
  }
  EXPECT_FALSE(structured_request(0, 0.5));  // every second request: 1, 3, 5, ...
  EXPECT_TRUE(structured_request(1, 0.5));
  EXPECT_FALSE(structured_request(2, 0.5));
}

TEST(StructuredLoad, BodyCarriesResponseFormatJsonSchema) {
  Prompt p;
  p.text = "hello";
  auto body = build_request_body(Endpoint::Chat, "m", p, 8, false);
  const auto schema = nlohmann::json::parse(default_structured_schema());
  EXPECT_EQ(schema["type"], "object");
  add_json_schema(body, schema);
  EXPECT_EQ(body["response_format"]["type"], "json_schema");
  EXPECT_EQ(body["response_format"]["json_schema"]["schema"], schema);
  EXPECT_EQ(body["response_format"]["json_schema"]["name"], "bench");
}
