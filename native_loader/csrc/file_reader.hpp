// Local file reads into the same buffer type the S3 engine produces.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "buffer.hpp"

namespace nl {

struct FileRead {
    std::shared_ptr<Storage> data;  // null on error
    int error = 0;                  // errno on failure
    int64_t file_size = -1;
};

// Reads [offset, offset + length) of a file (length < 0: to the end). A range past the end is
// cut short, like a POSIX read.
FileRead read_file(const std::string &path, int64_t offset, int64_t length);

}  // namespace nl
