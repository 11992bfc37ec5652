//! The GPU-check harness itself: a check passes on equal outputs and misses on a deviation
//! beyond its bound, element by element where asked; the suite's inputs replay from the seed.

use candle_core::{Device, Tensor};
use gnn_kernels::verify::Checker;

#[test]
fn checks_pass_within_and_miss_beyond_their_bounds() {
    let mut c = Checker::new(3);
    let cpu = Tensor::new(&[1.0f32, -2.0, 4.0], &Device::Cpu).unwrap();
    let close = Tensor::new(&[1.0f32, -2.0, 4.00002], &Device::Cpu).unwrap();
    c.check("g", "exact".into(), 3, &cpu, &cpu, 0.0).unwrap();
    c.check("g", "tolerant".into(), 3, &close, &cpu, 1e-5)
        .unwrap();
    c.check("g", "tight".into(), 3, &close, &cpu, 1e-6).unwrap();
    assert_eq!(
        c.rows.iter().map(|r| r.ok).collect::<Vec<_>>(),
        [true, true, false]
    );
    assert_eq!(c.misses(), 1);
    // Elementwise: the third element may move by 1e-4, the others not at all.
    let allowed = Tensor::new(&[0.0f64, 0.0, 1e-4], &Device::Cpu).unwrap();
    c.check_within("g", "within".into(), 3, &close, &cpu, &allowed)
        .unwrap();
    let off = Tensor::new(&[1.0f32 + 1e-6, -2.0, 4.0], &Device::Cpu).unwrap();
    c.check_within("g", "outside".into(), 3, &off, &cpu, &allowed)
        .unwrap();
    let last: Vec<bool> = c.rows[3..].iter().map(|r| r.ok).collect();
    assert_eq!(last, [true, false]);
    assert!((c.worst() - 5e-6).abs() < 1e-6, "{}", c.worst());
    // Mismatched lengths are an error, not a pass.
    let short = Tensor::new(&[1.0f32], &Device::Cpu).unwrap();
    assert!(c.check("g", "len".into(), 1, &short, &cpu, 1.0).is_err());
}

/// The whole suite with the CPU standing in for the GPU (f32 against the f64 reference): every
/// check's bound holds for a second implementation's rounding, and the checks run end to end
/// without a device.
#[test]
fn the_suite_passes_with_the_cpu_as_device() {
    let mut c = Checker::new(0);
    gnn_kernels::verify::run(&mut c, &Device::Cpu, 0.0, 0).unwrap();
    let missed: Vec<String> = c
        .rows
        .iter()
        .filter(|r| !r.ok)
        .map(|r| format!("{r:?}"))
        .collect();
    assert!(missed.is_empty(), "{} misses: {missed:#?}", missed.len());
    assert!(c.rows.len() > 500, "{} checks", c.rows.len());
}
