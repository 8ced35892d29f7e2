//! `Env::render` for classic control draws the state at gymnasium's sizes; `RecordVideo` writes one GIF frame per
//! step, and refuses an env that cannot draw.

use envs::{Action, CartPole, Env, MountainCar, Pendulum, RecordVideo};

/// The columns where `color` appears in the frame's row `y` (0: top).
fn columns(rgb: &[u8], (w, _): (usize, usize), y: usize, color: [u8; 3]) -> Vec<usize> {
    (0..w).filter(|&x| rgb[(y * w + x) * 3..(y * w + x) * 3 + 3] == color).collect()
}

/// CartPole draws a 600x400 frame. Its pole's tip is at column 300 when upright. It is over 10 columns right of that at
/// an angle of 0.2, and over 10 left at -0.2. With the cart at x 1, the tip is at column 425. The black cart covers
/// column 300 + 125 x.
#[test]
fn cartpole_draws_its_cart_and_its_pole_where_the_state_says() {
    let (mut env, mut rgb, mut obs) = (CartPole::new(), Vec::new(), [0f32; 4]);
    env.reset(Some(0), &mut obs);
    let pole = [202, 152, 101];
    let mut tip_columns = Vec::new();
    for (x, theta) in [(0.0, 0.0), (0.0, 0.2), (0.0, -0.2), (1.0, 0.0)] {
        env.state = [x, 0.0, theta, 0.0];
        let size = env.render(&mut rgb).expect("CartPole draws");
        assert_eq!((size, rgb.len()), ((600, 400), 600 * 400 * 3));
        // the pole's top is 125 px above the axle (at 400 - 107.5 from the top)
        let near_tip = columns(&rgb, size, 400 - 107 - 110, pole);
        assert!(!near_tip.is_empty(), "no pole near its tip at x {x}, theta {theta}");
        tip_columns.push(near_tip.iter().sum::<usize>() as f64 / near_tip.len() as f64);
        // the cart, black, around 300 + 125 x
        let cart = columns(&rgb, size, 400 - 100, [0, 0, 0]);
        assert!(cart.contains(&((300.0 + 125.0 * x) as usize)), "the cart at x {x}");
    }
    let [upright, right, left, moved] = tip_columns[..] else { unreachable!() };
    assert!((upright - 300.0).abs() < 2.0 && right > upright + 10.0 && left < upright - 10.0, "{tip_columns:?}");
    assert!((moved - 425.0).abs() < 2.0, "{tip_columns:?}");
}

/// MountainCar's frame changes when its car moves. Pendulum draws a 500x500 frame. Upright, its rod's colour is
/// straight above the axle and not below it.
#[test]
fn mountain_car_and_pendulum_draw_frames_that_change_with_the_state() {
    let mut rgb = Vec::new();
    let mut car = MountainCar::new();
    car.state = [-0.5, 0.0];
    let size = car.render(&mut rgb).expect("MountainCar draws");
    let before = rgb.clone();
    car.state = [0.3, 0.0];
    assert_eq!(car.render(&mut rgb), Some(size));
    assert_ne!(before, rgb);
    let mut pendulum = Pendulum::new();
    pendulum.state = [0.0, 0.0];
    let size = pendulum.render(&mut rgb).expect("Pendulum draws");
    assert_eq!(size, (500, 500));
    // upright: the rod's colour straight above the axle, none below it
    let rod = [204, 77, 77];
    assert!(columns(&rgb, size, 250 - 60, rod).contains(&250) && !columns(&rgb, size, 250 + 60, rod).contains(&250));
}

/// `RecordVideo` around CartPole leaves every observation and termination as the plain env's. Its first episode's GIF
/// is 600x400. It has a frame for the reset and one per step.
#[test]
fn record_video_writes_one_frame_per_step_and_leaves_observations_alone() {
    let dir = std::env::temp_dir().join(format!("envs-render-{}", std::process::id()));
    let recorded = RecordVideo::new(CartPole::new(), Some(dir.clone())).expect("CartPole can be recorded");
    let (mut plain, mut recorded) = (CartPole::new(), recorded);
    let (mut a, mut b) = ([0f32; 4], [0f32; 4]);
    plain.reset(Some(3), &mut a);
    recorded.reset(Some(3), &mut b);
    let mut steps = 0;
    loop {
        let action = Action::Discrete(&[steps % 2]);
        let (sa, sb) = (plain.step(action, &mut a), recorded.step(Action::Discrete(&[steps % 2]), &mut b));
        steps += 1;
        assert_eq!((a, sa.terminated), (b, sb.terminated), "step {steps}");
        if sb.terminated {
            break;
        }
    }
    recorded.reset(None, &mut b); // episode 1 is recorded too; its GIF starts
    let file = std::fs::File::open(dir.join("episode-0.gif")).expect("episode-0.gif");
    let mut decoder = gif::DecodeOptions::new().read_info(file).expect("a GIF");
    assert_eq!((decoder.width(), decoder.height()), (600, 400));
    let mut frames = 0;
    while decoder.read_next_frame().expect("a frame").is_some() {
        frames += 1;
    }
    assert_eq!(frames, steps as usize + 1, "the reset's frame and one per step");
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}

/// `RecordVideo` refuses an env that cannot draw, GridHarvest, with an error that names `--capture-video`. It makes no
/// video folder. Given no folder, it takes the same env, which then resets and steps.
#[test]
fn an_env_that_cannot_draw_cannot_be_recorded_and_without_a_folder_needs_not() {
    let dir = std::env::temp_dir().join(format!("envs-render-none-{}", std::process::id()));
    let refused = RecordVideo::new(envs::harvest::GridHarvest::new(), Some(dir.clone()));
    assert!(refused.is_err_and(|e| e.0.contains("cannot draw itself") && e.0.contains("--capture-video")));
    assert!(!dir.exists(), "no video folder for an env that cannot draw");
    let mut env = RecordVideo::new(envs::harvest::GridHarvest::new(), None).expect("nothing to record");
    let mut obs = vec![0f32; env.observation_space().flat_dim()];
    env.reset(Some(0), &mut obs);
    env.step(Action::Discrete(&[0, 0, 0]), &mut obs);
}
