// ALE's C++ interface as the few C functions envs::atari calls. ALE past 0.6 has no C API.
// No C++ exception crosses into Rust: loadROM's errors come back as a message.
#include <cstdint>
#include <cstring>
#include <exception>

#include "ale/ale_interface.hpp"

using ale::ALEInterface;

extern "C" {

// One emulator; its log says errors only, as ale-py's does.
ALEInterface* ale_new() {
  ale::Logger::setMode(ale::Logger::Error);
  try {
    return new ALEInterface();
  } catch (...) {
    return nullptr;
  }
}

void ale_delete(ALEInterface* ale) { delete ale; }

void ale_set_int(ALEInterface* ale, const char* key, int value) { ale->setInt(key, value); }

void ale_set_float(ALEInterface* ale, const char* key, float value) { ale->setFloat(key, value); }

// 0 when the ROM loaded; else 1, with the reason in `error` (cut to `size` bytes).
int ale_load_rom(ALEInterface* ale, const char* path, char* error, size_t size) {
  try {
    ale->loadROM(path);
    return 0;
  } catch (const std::exception& e) {
    std::strncpy(error, e.what(), size - 1);
    error[size - 1] = '\0';
    return 1;
  }
}

void ale_reset_game(ALEInterface* ale) { ale->reset_game(); }

int ale_act(ALEInterface* ale, int action) { return ale->act(static_cast<ale::Action>(action)); }

// The game ended (terminal), as ale-py's `game_over(with_truncation=False)`.
bool ale_game_over(ALEInterface* ale) { return ale->game_over(false); }

// The episode reached `max_num_frames_per_episode`; ALE then emulates no further.
bool ale_game_truncated(ALEInterface* ale) { return ale->game_truncated(); }

int ale_lives(ALEInterface* ale) { return ale->lives(); }

// The minimal action set into `out` (at most `size`); returns its length.
size_t ale_minimal_actions(ALEInterface* ale, int* out, size_t size) {
  ale::ActionVect actions = ale->getMinimalActionSet();
  for (size_t i = 0; i < actions.size() && i < size; i++) out[i] = actions[i];
  return actions.size();
}

// The screen's rows and columns: 210 x 160 for most games, not all.
void ale_screen_dims(ALEInterface* ale, size_t* height, size_t* width) {
  *height = ale->getScreen().height();
  *width = ale->getScreen().width();
}

// The screen as RGB, height x width x 3 bytes, written in place (no buffer per frame).
void ale_screen_rgb(ALEInterface* ale, uint8_t* out) {
  const ale::ALEScreen& screen = ale->getScreen();
  ale->theOSystem->colourPalette().applyPaletteRGB(out, screen.getArray(), screen.width() * screen.height());
}
}
