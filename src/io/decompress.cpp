// gzip (zlib), zstd (libzstd) and xz (liblzma) detection, decompression and compression of
// whole in-memory buffers; see decompress.hpp.
#include "io/decompress.hpp"

#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <initializer_list>
#include <string>

#include "eggroll/core/error.hpp"

namespace eggroll::detail {
namespace {

constexpr std::size_t kChunk = std::size_t{1} << 16;   // output buffer per step
constexpr std::size_t kMaxFeed = std::size_t{1} << 30;  // zlib counts input in 32-bit uInt

bool starts_with_bytes(std::string_view data, std::initializer_list<unsigned char> magic) {
  if (data.size() < magic.size()) return false;
  std::size_t i = 0;
  for (unsigned char m : magic) {
    if (static_cast<unsigned char>(data[i++]) != m) return false;
  }
  return true;
}

[[noreturn]] void throw_corrupt(const std::string& source, Compression c, const std::string& why) {
  throw_error("compressed file '", source, "' is corrupt or truncated (", compression_name(c),
              ": ", why, "); expected a complete ", compression_name(c),
              " stream (detected from its first bytes); re-create or re-download the file (a text corpus "
              "may instead exclude it with a pattern in task.exclude)");
}

std::string gunzip(std::string_view data, const std::string& source) {
  z_stream s{};
  if (inflateInit2(&s, 16 + MAX_WBITS) != Z_OK) throw_error("zlib: inflateInit2 failed (out of memory?)");
  struct End {
    z_stream* s;
    ~End() { inflateEnd(s); }
  } end{&s};
  std::string out;
  std::array<char, kChunk> buf;
  std::size_t fed = 0;  // bytes of `data` handed to zlib so far
  for (;;) {
    if (s.avail_in == 0 && fed < data.size()) {
      std::size_t n = std::min(kMaxFeed, data.size() - fed);
      s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + fed));
      s.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    s.next_out = reinterpret_cast<Bytef*>(buf.data());
    s.avail_out = static_cast<uInt>(buf.size());
    int rc = inflate(&s, Z_NO_FLUSH);
    out.append(buf.data(), buf.size() - s.avail_out);
    if (rc == Z_STREAM_END) {
      std::size_t consumed = fed - s.avail_in;
      if (consumed == data.size()) return out;
      // Another gzip member follows (as `cat a.gz b.gz` makes); anything else is garbage.
      if (!starts_with_bytes(data.substr(consumed), {0x1f, 0x8b})) {
        throw_corrupt(source, Compression::gzip,
                      std::to_string(data.size() - consumed) + " bytes of trailing garbage after the stream");
      }
      inflateReset(&s);
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && s.avail_in == 0 && fed == data.size()) {
      throw_corrupt(source, Compression::gzip, "the stream ends early");
    }
    if (rc == Z_BUF_ERROR) continue;
    throw_corrupt(source, Compression::gzip, s.msg ? s.msg : ("zlib error " + std::to_string(rc)));
  }
}

std::string unzstd(std::string_view data, const std::string& source) {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  if (!ctx) throw_error("zstd: ZSTD_createDCtx failed (out of memory?)");
  struct Free {
    ZSTD_DCtx* c;
    ~Free() { ZSTD_freeDCtx(c); }
  } free_ctx{ctx};
  std::string out;
  std::array<char, kChunk> buf;
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  std::size_t ret = 0;
  for (;;) {
    ZSTD_outBuffer o{buf.data(), buf.size(), 0};
    ret = ZSTD_decompressStream(ctx, &o, &in);
    if (ZSTD_isError(ret)) throw_corrupt(source, Compression::zstd, ZSTD_getErrorName(ret));
    out.append(buf.data(), o.pos);
    if (in.pos == in.size && o.pos < o.size) break;  // all input read and all output flushed
  }
  if (ret != 0) throw_corrupt(source, Compression::zstd, "the last frame ends early");
  return out;
}

std::string unxz(std::string_view data, const std::string& source) {
  lzma_stream s = LZMA_STREAM_INIT;
  lzma_ret rc = lzma_stream_decoder(&s, UINT64_MAX, LZMA_CONCATENATED);
  if (rc != LZMA_OK) throw_error("liblzma: lzma_stream_decoder failed with code ", static_cast<int>(rc));
  struct End {
    lzma_stream* s;
    ~End() { lzma_end(s); }
  } end{&s};
  std::string out;
  std::array<char, kChunk> buf;
  s.next_in = reinterpret_cast<const std::uint8_t*>(data.data());
  s.avail_in = data.size();
  for (;;) {
    s.next_out = reinterpret_cast<std::uint8_t*>(buf.data());
    s.avail_out = buf.size();
    rc = lzma_code(&s, LZMA_FINISH);
    out.append(buf.data(), buf.size() - s.avail_out);
    if (rc == LZMA_STREAM_END) return out;
    if (rc == LZMA_OK) continue;
    const char* why = rc == LZMA_BUF_ERROR      ? "the stream ends early"
                      : rc == LZMA_DATA_ERROR   ? "data error"
                      : rc == LZMA_FORMAT_ERROR ? "not an xz stream"
                      : rc == LZMA_MEM_ERROR    ? "out of memory"
                      : rc == LZMA_OPTIONS_ERROR ? "unsupported options"
                                                 : "liblzma error";
    throw_corrupt(source, Compression::xz, why);
  }
}

}  // namespace

Compression detect_compression(std::string_view data) {
  if (starts_with_bytes(data, {0x1f, 0x8b})) return Compression::gzip;
  if (starts_with_bytes(data, {0x28, 0xb5, 0x2f, 0xfd})) return Compression::zstd;
  if (starts_with_bytes(data, {0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00})) return Compression::xz;
  return Compression::none;
}

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::gzip: return "gzip";
    case Compression::zstd: return "zstd";
    case Compression::xz: return "xz";
    case Compression::none: break;
  }
  return "none";
}

std::string decompress(std::string_view data, Compression c, const std::string& source) {
  switch (c) {
    case Compression::gzip: return gunzip(data, source);
    case Compression::zstd: return unzstd(data, source);
    case Compression::xz: return unxz(data, source);
    case Compression::none: break;
  }
  return std::string(data);
}

std::string gzip_compress(std::string_view data, int level) {
  z_stream s{};
  if (deflateInit2(&s, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw_error("zlib: deflateInit2 failed for level ", level, "; expected a level in 0..9");
  }
  struct End {
    z_stream* s;
    ~End() { deflateEnd(s); }
  } end{&s};
  std::string out;
  std::array<char, kChunk> buf;
  std::size_t fed = 0;
  int flush = Z_NO_FLUSH;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (s.avail_in == 0 && flush != Z_FINISH) {
      std::size_t n = std::min(kMaxFeed, data.size() - fed);
      s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + fed));
      s.avail_in = static_cast<uInt>(n);
      fed += n;
      if (fed == data.size()) flush = Z_FINISH;
    }
    s.next_out = reinterpret_cast<Bytef*>(buf.data());
    s.avail_out = static_cast<uInt>(buf.size());
    rc = deflate(&s, flush);
    if (rc == Z_STREAM_ERROR) throw_error("zlib: deflate failed (stream error)");
    out.append(buf.data(), buf.size() - s.avail_out);
  }
  return out;
}

std::string zstd_compress(std::string_view data, int level) {
  ZSTD_CCtx* ctx = ZSTD_createCCtx();
  if (!ctx) throw_error("zstd: ZSTD_createCCtx failed (out of memory?)");
  struct Free {
    ZSTD_CCtx* c;
    ~Free() { ZSTD_freeCCtx(c); }
  } free_ctx{ctx};
  // With a content checksum, as the zstd tool writes, so corruption is detected on reading.
  std::size_t rc = ZSTD_CCtx_setParameter(ctx, ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(ctx, ZSTD_c_checksumFlag, 1);
  if (ZSTD_isError(rc)) throw_error("zstd: compression level ", level, " rejected: ", ZSTD_getErrorName(rc));
  std::string out(ZSTD_compressBound(data.size()), '\0');
  std::size_t n = ZSTD_compress2(ctx, out.data(), out.size(), data.data(), data.size());
  if (ZSTD_isError(n)) throw_error("zstd: compression at level ", level, " failed: ", ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

std::string xz_compress(std::string_view data, std::uint32_t preset) {
  std::string out(lzma_stream_buffer_bound(data.size()), '\0');
  std::size_t out_pos = 0;
  lzma_ret rc = lzma_easy_buffer_encode(preset, LZMA_CHECK_CRC64, nullptr,
                                        reinterpret_cast<const std::uint8_t*>(data.data()), data.size(),
                                        reinterpret_cast<std::uint8_t*>(out.data()), &out_pos, out.size());
  if (rc != LZMA_OK) {
    throw_error("liblzma: lzma_easy_buffer_encode with preset ", preset, " failed with code ",
                static_cast<int>(rc), "; expected a preset in 0..9");
  }
  out.resize(out_pos);
  return out;
}

}  // namespace eggroll::detail
