// The GGUF writer against the format as llama.cpp's gguf.h describes it, read back by a reader written
// here from that description; and its f16 and Q8_0 encodings against hand-computed values.
#include "export/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "export/gguf_model.h"
#include "export/gguf_read.h"
#include "export/gguf_tokenizer.h"
#include "framework/error.h"
#include "support/temp_dir.h"

namespace tf::exporting {
namespace {

// A reader of GGUF v3 (gguf.h): little-endian header, key/value pairs, tensor infos, aligned data.
struct ReadGguf {
  uint32_t version = 0;
  std::map<std::string, std::string> strings;  // string values
  std::map<std::string, uint64_t> integers;    // u32, i32, u64, bool values
  std::map<std::string, float> floats;
  std::map<std::string, std::vector<std::string>> string_arrays;
  struct Info {
    std::vector<uint64_t> ne;
    uint32_t type = 0;
    uint64_t offset = 0;
  };
  std::map<std::string, Info> tensors;
  uint64_t data_start = 0;
  std::string bytes;
};

ReadGguf read_independently(const std::string& path) {
  ReadGguf g;
  std::ifstream in(path, std::ios::binary);
  g.bytes.assign(std::istreambuf_iterator<char>(in), {});
  size_t at = 0;
  auto take = [&](auto& value) {
    std::memcpy(&value, g.bytes.data() + at, sizeof value);
    at += sizeof value;
  };
  auto take_string = [&] {
    uint64_t n = 0;
    take(n);
    std::string s = g.bytes.substr(at, n);
    at += n;
    return s;
  };
  EXPECT_EQ(g.bytes.substr(0, 4), "GGUF");
  at = 4;
  take(g.version);
  uint64_t n_tensors = 0, n_kv = 0;
  take(n_tensors);
  take(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = take_string();
    uint32_t type = 0;
    take(type);
    if (type == 4 || type == 5) {
      uint32_t v = 0;
      take(v);
      g.integers[key] = v;
    } else if (type == 10) {
      uint64_t v = 0;
      take(v);
      g.integers[key] = v;
    } else if (type == 7) {
      uint8_t v = 0;
      take(v);
      g.integers[key] = v;
    } else if (type == 6) {
      float v = 0;
      take(v);
      g.floats[key] = v;
    } else if (type == 8) {
      g.strings[key] = take_string();
    } else {
      EXPECT_EQ(type, 9u) << key;
      uint32_t element = 0;
      uint64_t n = 0;
      take(element);
      take(n);
      for (uint64_t j = 0; j < n; ++j) {
        if (element == 8) {
          g.string_arrays[key].push_back(take_string());
        } else {
          EXPECT_TRUE(element == 5 || element == 6) << key;
          at += 4;
        }
      }
    }
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = take_string();
    uint32_t dims = 0;
    take(dims);
    ReadGguf::Info info;
    info.ne.resize(dims);
    for (uint64_t& d : info.ne) take(d);
    take(info.type);
    take(info.offset);
    g.tensors[name] = info;
  }
  g.data_start = (at + 31) / 32 * 32;
  return g;
}

uint16_t half_bits(float x) {
  uint16_t bits = 0;
  std::memcpy(&bits, encode_f16(std::vector<float>{x}).data(), 2);
  return bits;
}

// Every one of the 65,536 halves: decoded against its value by the format's formula (in double),
// encoded back to itself; the midpoint between two neighbours goes to the even one, and a float
// just inside either side of it to the nearer.
TEST(Gguf, EveryHalfDecodesToItsValueAndEncodesBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double sign = h & 0x8000 ? -1.0 : 1.0;
    const float x = float_from_half(static_cast<uint16_t>(h));
    if (exponent == 31 && mantissa != 0) {
      EXPECT_TRUE(std::isnan(x)) << h;
      EXPECT_TRUE(std::isnan(float_from_half(half_from_float(x)))) << h;
      continue;
    }
    const double value = exponent == 31 ? sign * INFINITY
                         : exponent == 0 ? sign * std::ldexp(mantissa, -24)
                                         : sign * std::ldexp(1.0 + mantissa / 1024.0, static_cast<int>(exponent) - 15);
    ASSERT_EQ(static_cast<double>(x), value) << h;
    ASSERT_EQ(std::signbit(x), (h & 0x8000) != 0) << h;
    ASSERT_EQ(half_from_float(x), h) << h;
    if (exponent == 31 || (h & 0x7fff) == 0x7bff) continue;  // no finite neighbour above
    const float next = float_from_half(static_cast<uint16_t>(h + 1));  // the next magnitude, same sign
    const float mid = static_cast<float>((static_cast<double>(x) + next) / 2);  // exact in float
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(half_from_float(mid), even) << h;
    ASSERT_EQ(half_from_float(std::nextafter(mid, x)), h) << h;
    ASSERT_EQ(half_from_float(std::nextafter(mid, next)), h + 1) << h;
  }
  EXPECT_EQ(half_from_float(65520.0f), 0x7C00);  // halfway above the largest half: to even, inf
  EXPECT_EQ(half_from_float(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(half_from_float(-1e30f), 0xFC00);
  EXPECT_EQ(half_from_float(std::ldexp(1.0f, -25)), 0x0000);  // halfway to the smallest subnormal: to even, 0
  EXPECT_EQ(half_from_float(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(half_from_float(-0.0f), 0x8000);
}

TEST(Gguf, HalfPrecisionRoundsToNearestEven) {
  EXPECT_EQ(half_bits(1.0f), 0x3C00);
  EXPECT_EQ(half_bits(-2.0f), 0xC000);
  EXPECT_EQ(half_bits(65504.0f), 0x7BFF);  // the largest half
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  // Halfway between 1 and 1 + 2^-10 (the next half): to the even one, 1; halfway above that: 1 + 2^-9.
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  const std::vector<float> back = decode_f16(encode_f16(std::vector<float>{0.1f, -3.5f}));
  EXPECT_EQ(back[1], -3.5f);
  EXPECT_NEAR(back[0], 0.1f, 0.1f * std::ldexp(1.0f, -11));
}

TEST(Gguf, Q8ZeroScalesEachBlockOf32ByItsLargestMagnitude) {
  std::vector<float> x(64);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i) - 10.0f;  // block 0: max |x| = 21
  for (int i = 32; i < 64; ++i) x[i] = 0.0f;                           // block 1: all zero, scale 0
  const std::vector<char> q = encode_q8_0(x);
  ASSERT_EQ(q.size(), 2u * 34u);
  EXPECT_EQ(static_cast<int8_t>(q[2 + 31]), 127);                     // 21 / (21 / 127)
  EXPECT_EQ(static_cast<int8_t>(q[2 + 0]), static_cast<int8_t>(std::round(-10.0 * 127 / 21)));  // -60
  EXPECT_EQ(static_cast<int8_t>(q[2 + 0]), -60);
  const std::vector<float> back = decode_q8_0(q);
  const float d = decode_f16(std::vector<char>(q.begin(), q.begin() + 2))[0];
  EXPECT_NEAR(d, 21.0f / 127, 21.0f / 127 * std::ldexp(1.0f, -11));
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(back[i], x[i], d / 2 + 1e-6) << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(back[i], 0.0f);
}

TEST(Gguf, TheFileHoldsTheMetadataAndAlignedTensorsAsWritten) {
  testing::TempDir dir;
  GgufFile file;
  file.set("general.architecture", std::string("llama"));
  file.set("llama.block_count", uint32_t{3});
  file.set("llama.rope.freq_base", 10000.0f);
  file.set("tokenizer.ggml.add_bos_token", false);
  file.set("tokenizer.ggml.tokens", std::vector<std::string>{"<unk>", "a", "\xE2\x96\x81"});
  file.set("tokenizer.ggml.scores", std::vector<float>{0, 0, 0});
  file.set("llama.block_count", uint32_t{2});  // a key set twice keeps its last value, once
  std::vector<float> matrix(3 * 5), vector(7), wide(2 * 64);
  for (size_t i = 0; i < matrix.size(); ++i) matrix[i] = 0.25f * static_cast<float>(i);
  for (size_t i = 0; i < vector.size(); ++i) vector[i] = -static_cast<float>(i);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = std::sin(static_cast<float>(i));
  file.add_tensor("m", {3, 5}, matrix, GgufType::f32);  // 60 bytes: the next tensor starts at 64
  file.add_tensor("v", {7}, vector, GgufType::f16);
  file.add_tensor("w", {2, 64}, wide, GgufType::q8_0);
  const std::string path = (dir.path() / "x.gguf").string();
  file.write(path);

  const ReadGguf g = read_independently(path);
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.strings.at("general.architecture"), "llama");
  EXPECT_EQ(g.integers.at("llama.block_count"), 2u);
  EXPECT_EQ(g.floats.at("llama.rope.freq_base"), 10000.0f);
  EXPECT_EQ(g.integers.at("tokenizer.ggml.add_bos_token"), 0u);
  EXPECT_EQ(g.string_arrays.at("tokenizer.ggml.tokens"), (std::vector<std::string>{"<unk>", "a", "\xE2\x96\x81"}));
  ASSERT_EQ(g.tensors.size(), 3u);
  const auto& m = g.tensors.at("m");
  EXPECT_EQ(m.ne, (std::vector<uint64_t>{5, 3}));  // innermost first
  EXPECT_EQ(m.type, 0u);
  EXPECT_EQ(m.offset, 0u);
  EXPECT_EQ(g.tensors.at("v").offset, 64u);
  EXPECT_EQ(g.tensors.at("v").type, 1u);
  EXPECT_EQ(g.tensors.at("w").offset, 96u);  // 64 + 14 bytes of f16, aligned up
  EXPECT_EQ(g.tensors.at("w").type, 8u);
  EXPECT_EQ(g.tensors.at("w").ne, (std::vector<uint64_t>{64, 2}));
  EXPECT_EQ(g.data_start % 32, 0u);
  float stored[15];
  std::memcpy(stored, g.bytes.data() + g.data_start, sizeof stored);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(stored[i], matrix[i]);
  const std::vector<float> v = decode_f16({g.bytes.data() + g.data_start + 64, 14});
  for (int i = 0; i < 7; ++i) EXPECT_EQ(v[i], vector[i]);
  EXPECT_EQ(g.bytes.size(), g.data_start + 96 + 4 * 34 + 24);  // 4 blocks of 34 bytes, padded to 32 too
}

TEST(Gguf, Q8ZeroRefusesRowsThatAreNotWholeBlocks) {
  GgufFile file;
  const std::vector<float> x(3 * 40);
  try {
    file.add_tensor("blk.0.ffn_down.weight", {3, 40}, x, GgufType::q8_0);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'blk.0.ffn_down.weight' has rows of 40 values, not a multiple of 32"),
              std::string::npos)
        << e.what();
  }
}

// A damaged or foreign GGUF file is refused with what is wrong and where, never read past its end.
TEST(Gguf, ADamagedFileIsRefusedNamingWhatIsWrong) {
  testing::TempDir dir;
  GgufFile file;
  file.set("general.architecture", std::string("llama"));
  const std::vector<float> x(2 * 32, 0.5f);
  file.add_tensor("t", {2, 32}, x, GgufType::f32);
  const std::string path = (dir.path() / "ok.gguf").string();
  file.write(path);
  const std::string good = testing::read_file(path);
  ASSERT_EQ(read_gguf(path).tensors.at("t").values, x);
  ASSERT_EQ(read_gguf(path).strings.at("general.architecture"), "llama");
  const size_t key_type = 24 + 8 + std::string("general.architecture").size();  // after the key's name
  const size_t info = good.find(std::string("\x01\0\0\0\0\0\0\0t", 9));  // the tensor's name: length 1, "t"
  ASSERT_NE(info, std::string::npos);
  const size_t dims = info + 8 + 1, type = dims + 4 + 2 * 8;
  const auto patched = [&](size_t at, uint32_t value) {
    std::string bytes = good;
    std::memcpy(bytes.data() + at, &value, 4);
    return bytes;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"XXXX" + good.substr(4), "not a GGUF file (no GGUF magic)"},
      {patched(4, 2), "GGUF version 2 is not supported"},
      {patched(8, 0xFFFFFFFF), "implausible GGUF counts"},
      {patched(key_type, 99), "unknown value type 99"},
      {patched(dims, 7), "has 7 dimensions"},
      {patched(dims + 4, 0), "has a dimension of 0"},
      {patched(type, 2), "has type 2; this build reads f32 (0), f16 (1) and q8_0 (8)"},
      {good.substr(0, 30), "truncated GGUF file"},
      {good.substr(0, good.size() - 8), "lies outside the file"},
  };
  for (const auto& [bytes, reason] : cases) {
    const std::string damaged = (dir.path() / "damaged.gguf").string();
    std::ofstream(damaged, std::ios::binary | std::ios::trunc) << bytes;
    try {
      read_gguf(damaged);
      ADD_FAILURE() << "no error for: " << reason;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("damaged.gguf"), std::string::npos) << e.what();
    }
  }
}

// SentencePiece writes a space as U+2581; a vocabulary that holds both could not be told apart.
TEST(Gguf, ACharacterVocabularyHoldingTheSpaceMarkIsRefused) {
  GgufFile file;
  const data::CharTokenizer tokenizer = data::CharTokenizer::train("a b\xE2\x96\x81");
  try {
    add_gguf_tokenizer(file, tokenizer);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the character vocabulary holds U+2581"), std::string::npos) << e.what();
  }
  add_gguf_tokenizer(file, data::CharTokenizer::train("a b"));  // without it: accepted
}

// GPT-2's byte-to-unicode table worked by hand: bytes 0..32 are U+0100..U+0120 (' ' is U+0120 "Ġ",
// '\n' U+010A "Ċ"), 127..160 U+0121..U+0142, 0xAD U+0143 "Ń"; printable bytes stand for themselves.
TEST(Gguf, TheBpeVocabularyIsWrittenAsGpt2sByteStringsWithItsMerges) {
  const data::BpeTokenizer tokenizer = data::BpeTokenizer::train("ab ab ab cd cd cd", 300);  // " c", "ab", " cd", " ab"
  GgufFile file;
  add_gguf_tokenizer(file, tokenizer);
  const testing::TempDir dir;
  file.write(dir.path() / "t.gguf");
  const ReadGguf g = read_independently((dir.path() / "t.gguf").string());
  EXPECT_EQ(g.strings.at("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.strings.at("tokenizer.ggml.pre"), "gpt-2");
  const std::vector<std::string>& tokens = g.string_arrays.at("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 260u);
  EXPECT_EQ(tokens[' '], "\xC4\xA0");
  EXPECT_EQ(tokens['\n'], "\xC4\x8A");
  EXPECT_EQ(tokens[0], "\xC4\x80");
  EXPECT_EQ(tokens[127], "\xC4\xA1");
  EXPECT_EQ(tokens[0xAD], "\xC5\x83");
  EXPECT_EQ(tokens['a'], "a");
  EXPECT_EQ(tokens[0xFF], "\xC3\xBF");
  EXPECT_EQ(tokens[258], "\xC4\xA0" "cd");
  EXPECT_EQ(g.string_arrays.at("tokenizer.ggml.merges"),
            (std::vector<std::string>{"\xC4\xA0 c", "a b", "\xC4\xA0" "c d", "\xC4\xA0 ab"}));
  EXPECT_EQ(g.integers.at("tokenizer.ggml.eos_token_id"), 0xFFu);
}

// The older pre-tokenizer has no llama.cpp counterpart; a GGUF file would cut some texts otherwise.
TEST(Gguf, ABpeTokenizerWithTheOlderPreTokenizerIsRefused) {
  const data::BpeTokenizer old({{'a', 'b'}}, data::Pretokenizer::gpt2_classes);
  GgufFile file;
  try {
    add_gguf_tokenizer(file, old);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("older pre-tokenizer 'gpt2-classes'"), std::string::npos) << e.what();
  }
  add_gguf_tokenizer(file, data::BpeTokenizer({{'a', 'b'}}));  // gpt2: accepted
}

// What ModelConfig::unexported_options lists is refused by both architectures, by key: an option
// of the attention variant (Note [variant options]) and one of the output logits (Note [output logits]).
TEST(Gguf, OptionsNoArchitectureExpressesAreRefusedByKey) {
  layers::ModelConfig c;  // otherwise llama's shape
  c.position = layers::PositionEncoding::rope;
  c.norm = kernels::NormKind::rms;
  c.feed_forward = kernels::FeedForwardKind::swiglu;
  c.bias = false;
  ASSERT_TRUE(gguf_mismatches(c, GgufArch::llama).empty());
  c.final_softcap = 30;
  c.attention.logit_softcap = 50;
  for (GgufArch arch : {GgufArch::llama, GgufArch::gpt2}) {
    const std::vector<std::string> why = gguf_mismatches(c, arch);
    for (const std::string key : {"model.final_softcap is set", "model.logit_softcap is set"})
      EXPECT_TRUE(std::any_of(why.begin(), why.end(), [&](const std::string& w) { return w.rfind(key, 0) == 0; }))
          << key << " missing for " << gguf_arch_name(arch);
  }
}

}  // namespace
}  // namespace tf::exporting
