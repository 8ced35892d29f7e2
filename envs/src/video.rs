//! gymnasium's RecordVideo, as CleanRL's `--capture-video` uses it.

use crate::env::forward;
use crate::{Action, Env, EnvError, Space, Step};
use std::path::PathBuf;

/// gymnasium's RecordVideo: every frame of the episodes chosen by CleanRL's schedule (episodes 0,
/// 1, 8, 27, ..., 729, then every 1000th), as the env draws it (`Env::render`), written as GIFs
/// `<dir>/episode-<id>.gif` frame by frame as they are played (nothing kept in memory). Wraps the
/// raw env (Atari: the game's RGB screen, before any preprocessing). A video that cannot be made
/// (a file that cannot be written) is reported once, and training goes on; observations pass
/// through unchanged.
pub struct RecordVideo<E> {
    inner: E,
    dir: Option<PathBuf>,
    episode_id: u64,
    frame: Vec<u8>,
    gif: Option<gif::Encoder<std::io::BufWriter<std::fs::File>>>,
}

impl<E: Env> RecordVideo<E> {
    /// Records into `dir` (created when needed); with `None` it only passes steps through. An env
    /// that cannot draw itself (`Env::render`: MuJoCo's here) cannot be recorded: an error.
    pub fn new(inner: E, dir: Option<PathBuf>) -> Result<Self, EnvError> {
        if dir.is_some() && inner.render(&mut Vec::new()).is_none() {
            return Err(EnvError("this env cannot draw itself: it cannot be recorded (--capture-video)".into()));
        }
        Ok(RecordVideo { inner, dir, episode_id: 0, frame: Vec::new(), gif: None })
    }

    fn scheduled(episode_id: u64) -> bool {
        if episode_id < 1000 {
            let root = (episode_id as f64).cbrt().round() as u64;
            root * root * root == episode_id
        } else {
            episode_id.is_multiple_of(1000)
        }
    }

    /// Starts this episode's GIF with its first frame.
    fn start(&mut self) -> std::io::Result<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let (w, h) = self.inner.render(&mut self.frame).ok_or_else(|| std::io::Error::other("the env cannot draw"))?;
        std::fs::create_dir_all(dir)?;
        let file =
            std::io::BufWriter::new(std::fs::File::create(dir.join(format!("episode-{}.gif", self.episode_id)))?);
        let mut gif = gif::Encoder::new(file, w as u16, h as u16, &[]).map_err(std::io::Error::other)?;
        gif.set_repeat(gif::Repeat::Infinite).map_err(std::io::Error::other)?;
        self.gif = Some(gif);
        self.record(w, h)
    }

    /// Appends the frame in `self.frame`, indexed with its own palette (an Atari frame, or a drawing,
    /// has fewer than 256 colours).
    fn record(&mut self, w: usize, h: usize) -> std::io::Result<()> {
        let Some(gif) = &mut self.gif else { return Ok(()) };
        let mut palette: Vec<[u8; 3]> = Vec::new();
        let pixels: Vec<u8> = self
            .frame
            .chunks_exact(3)
            .map(|px| {
                let rgb = [px[0], px[1], px[2]];
                let i = palette.iter().position(|c| *c == rgb).unwrap_or_else(|| {
                    palette.push(rgb);
                    palette.len() - 1
                });
                i.min(255) as u8
            })
            .collect();
        let mut frame = gif::Frame::from_palette_pixels(w as u16, h as u16, pixels, palette.concat(), None);
        frame.delay = 2; // hundredths of a second: about the Atari's 60 frames per second
        gif.write_frame(&frame).map_err(std::io::Error::other)
    }

    fn guard(&mut self, result: std::io::Result<()>) {
        if let Err(e) = result {
            eprintln!("warning: video recording stopped: {e}");
            (self.dir, self.gif) = (None, None);
        }
    }
}

impl<E: Env> Env for RecordVideo<E> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32; send_step);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.inner.reset(seed, obs);
        self.gif = None;
        if self.dir.is_some() && Self::scheduled(self.episode_id) {
            let started = self.start();
            self.guard(started);
        }
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let step = self.inner.step(action, obs);
        if self.gif.is_some() {
            let recorded = match self.inner.render(&mut self.frame) {
                Some((w, h)) => self.record(w, h),
                None => Err(std::io::Error::other("the env cannot draw")),
            };
            self.guard(recorded);
        }
        if step.terminated || step.truncated {
            self.gif = None; // dropping the encoder writes the GIF trailer
            self.episode_id += 1;
        }
        step
    }
}
