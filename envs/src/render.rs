//! The pictures of `Env::render` for classic control (gymnasium's `rgb_array` frames, in its sizes,
//! shapes and colours): a small canvas with y pointing up, as gymnasium's pygame code draws before
//! it flips the image.

use std::f64::consts::PI;

type Rgb = [u8; 3];
const BLACK: Rgb = [0, 0, 0];

struct Canvas<'a> {
    rgb: &'a mut Vec<u8>,
    w: usize,
    h: usize,
}

impl<'a> Canvas<'a> {
    /// A white `w` x `h` picture in `rgb`.
    fn new(rgb: &'a mut Vec<u8>, w: usize, h: usize) -> Self {
        rgb.clear();
        rgb.resize(w * h * 3, 255);
        Canvas { rgb, w, h }
    }

    /// Fills the convex polygon `points` (x right, y up, in pixels).
    fn polygon(&mut self, points: &[(f64, f64)], color: Rgb) {
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in points {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
        }
        let clamp = |v: f64, n: usize| (v.max(0.0) as usize).min(n);
        for y in clamp(y0.floor(), self.h)..clamp(y1.ceil() + 1.0, self.h) {
            for x in clamp(x0.floor(), self.w)..clamp(x1.ceil() + 1.0, self.w) {
                let (px, py) = (x as f64 + 0.5, y as f64 + 0.5);
                // inside when on the same side of every edge
                let sides = points
                    .iter()
                    .zip(points.iter().cycle().skip(1))
                    .map(|(&(ax, ay), &(bx, by))| (bx - ax) * (py - ay) - (by - ay) * (px - ax));
                let (mut pos, mut neg) = (false, false);
                for s in sides {
                    (pos, neg) = (pos || s > 0.0, neg || s < 0.0);
                }
                if !(pos && neg) {
                    let i = ((self.h - 1 - y) * self.w + x) * 3;
                    self.rgb[i..i + 3].copy_from_slice(&color);
                }
            }
        }
    }

    /// A disc of radius `r` around (x, y), as a 32-gon.
    fn disc(&mut self, (x, y): (f64, f64), r: f64, color: Rgb) {
        let points: Vec<_> =
            (0..32).map(|i| i as f64 * PI / 16.0).map(|a| (x + r * a.cos(), y + r * a.sin())).collect();
        self.polygon(&points, color);
    }

    /// A segment from `a` to `b`, `width` pixels wide.
    fn segment(&mut self, a: (f64, f64), b: (f64, f64), width: f64, color: Rgb) {
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let len = dx.hypot(dy).max(1e-9);
        let (nx, ny) = (-dy / len * width / 2.0, dx / len * width / 2.0);
        self.polygon(&[(a.0 + nx, a.1 + ny), (b.0 + nx, b.1 + ny), (b.0 - nx, b.1 - ny), (a.0 - nx, a.1 - ny)], color);
    }
}

/// The rectangle (left, right, top, bottom) turned by `angle` (counterclockwise) and moved to `at`.
fn box_at((l, r, t, b): (f64, f64, f64, f64), angle: f64, at: (f64, f64)) -> [(f64, f64); 4] {
    [(l, b), (l, t), (r, t), (r, b)].map(|(x, y)| turn((x, y), angle, at))
}

fn turn((x, y): (f64, f64), angle: f64, (ox, oy): (f64, f64)) -> (f64, f64) {
    let (s, c) = angle.sin_cos();
    (x * c - y * s + ox, x * s + y * c + oy)
}

/// CartPole-v1: the cart on its track, the pole turned by theta (state: x, x_dot, theta, theta_dot).
pub(crate) fn cartpole(state: &[f64; 4], rgb: &mut Vec<u8>) -> (usize, usize) {
    let (w, h) = (600, 400);
    let mut canvas = Canvas::new(rgb, w, h);
    let scale = w as f64 / 4.8;
    let (cartx, carty) = (state[0] * scale + w as f64 / 2.0, 100.0);
    canvas.polygon(&box_at((-25.0, 25.0, 15.0, -15.0), 0.0, (cartx, carty)), BLACK);
    let axle = (cartx, carty + 7.5);
    canvas.polygon(&box_at((-5.0, 5.0, scale - 5.0, -5.0), -state[2], axle), [202, 152, 101]);
    canvas.disc(axle, 5.0, [129, 132, 203]);
    canvas.segment((0.0, carty), (w as f64, carty), 1.0, BLACK);
    (w, h)
}

/// Acrobot-v1: the two links from the pivot, and the height to reach (state: theta1, theta2, ...).
pub(crate) fn acrobot(state: &[f64; 4], rgb: &mut Vec<u8>) -> (usize, usize) {
    let (w, h) = (500, 500);
    let mut canvas = Canvas::new(rgb, w, h);
    let (scale, offset) = (w as f64 / 4.4, w as f64 / 2.0);
    let at = |(x, y): (f64, f64)| (x * scale + offset, y * scale + offset);
    let p1 = (state[0].sin(), -state[0].cos());
    let p2 = (p1.0 + (state[0] + state[1]).sin(), p1.1 - (state[0] + state[1]).cos());
    canvas.segment(at((-2.2, 1.0)), at((2.2, 1.0)), 1.0, BLACK);
    for (a, b) in [((0.0, 0.0), p1), (p1, p2)] {
        canvas.segment(at(a), at(b), 0.2 * scale, [0, 204, 204]);
        canvas.disc(at(a), 0.1 * scale, [204, 204, 0]);
    }
    (w, h)
}

/// MountainCar-v0 and MountainCarContinuous-v0: the hill, the car at `position`, the goal's flag.
pub(crate) fn mountain_car(position: f64, goal: f64, rgb: &mut Vec<u8>) -> (usize, usize) {
    let (w, h) = (600, 400);
    let mut canvas = Canvas::new(rgb, w, h);
    let (min, scale) = (-1.2, w as f64 / 1.8);
    let height = |x: f64| (3.0 * x).sin() * 0.45 + 0.55;
    let at = |x: f64| ((x - min) * scale, height(x) * scale);
    for i in 0..100 {
        let (a, b) = (min + 1.8 * i as f64 / 100.0, min + 1.8 * (i + 1) as f64 / 100.0);
        canvas.segment(at(a), at(b), 2.0, BLACK);
    }
    let (angle, base) = ((3.0 * position).cos(), (at(position).0, at(position).1 + 10.0));
    canvas.polygon(&box_at((-20.0, 20.0, 20.0, 0.0), angle, base), BLACK);
    for wheel in [(10.0, 0.0), (-10.0, 0.0)] {
        canvas.disc(turn(wheel, angle, base), 8.0, [128, 128, 128]);
    }
    let flag = at(goal);
    canvas.segment(flag, (flag.0, flag.1 + 50.0), 1.0, BLACK);
    canvas.polygon(&[(flag.0, flag.1 + 50.0), (flag.0, flag.1 + 40.0), (flag.0 + 25.0, flag.1 + 45.0)], [204, 204, 0]);
    (w, h)
}

/// Pendulum-v1: the rod turned by theta (0: upright) around its axle.
pub(crate) fn pendulum(theta: f64, rgb: &mut Vec<u8>) -> (usize, usize) {
    let (w, h) = (500, 500);
    let mut canvas = Canvas::new(rgb, w, h);
    let (scale, center) = (w as f64 / 4.4, (w as f64 / 2.0, h as f64 / 2.0));
    let end = turn((scale, 0.0), theta + PI / 2.0, center);
    canvas.segment(center, end, 0.2 * scale, [204, 77, 77]);
    canvas.disc(end, 0.1 * scale, [204, 77, 77]);
    canvas.disc(center, 0.05 * scale, BLACK);
    (w, h)
}
