// The one error the lesson library throws. Every part of it (the Markdown
// parser, the marker syntax, the anchor scanner, reading files) reports a
// problem the same way, naming the file and the line, so an author can jump
// straight to it and the viewer can show it in one line.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

namespace pa::lesson {

// Every error names the file and 1-based line (line 0: the whole file).
// what() is "file:line: message".
class LessonError : public std::runtime_error {
 public:
  LessonError(std::string file, int line, const std::string& message)
      : std::runtime_error(file + ":" + std::to_string(line) + ": " + message),
        file_(std::move(file)),
        line_(line),
        message_(message) {}
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_;
  std::string message_;
};

}  // namespace pa::lesson
