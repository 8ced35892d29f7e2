//! ALE, the Arcade Learning Environment, for envs::atari: the C functions of `src/ale.cpp` over ALE's C++ interface,
//! compiled with ALE's sources by build.rs and linked statically.
use std::ffi::{c_char, c_float, c_int};

/// One emulator.
#[repr(C)]
pub struct AleInterface {
    _private: [u8; 0],
}

extern "C" {
    pub fn ale_new() -> *mut AleInterface;
    pub fn ale_delete(ale: *mut AleInterface);
    pub fn ale_set_int(ale: *mut AleInterface, key: *const c_char, value: c_int);
    pub fn ale_set_float(ale: *mut AleInterface, key: *const c_char, value: c_float);
    pub fn ale_load_rom(ale: *mut AleInterface, path: *const c_char, error: *mut c_char, size: usize) -> c_int;
    pub fn ale_reset_game(ale: *mut AleInterface);
    pub fn ale_act(ale: *mut AleInterface, action: c_int) -> c_int;
    pub fn ale_game_over(ale: *mut AleInterface) -> bool;
    pub fn ale_game_truncated(ale: *mut AleInterface) -> bool;
    pub fn ale_lives(ale: *mut AleInterface) -> c_int;
    pub fn ale_minimal_actions(ale: *mut AleInterface, out: *mut c_int, size: usize) -> usize;
    pub fn ale_screen_dims(ale: *mut AleInterface, height: *mut usize, width: *mut usize);
    pub fn ale_screen_rgb(ale: *mut AleInterface, out: *mut u8);
}
