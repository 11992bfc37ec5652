//! CPU quantisation and dequantisation (rayon over rows).

use rayon::prelude::*;

/// `(scale, min, codes)` of row-major `data` (`rows * cols`, finite).
pub fn quantize(data: &[f32], rows: usize, cols: usize) -> (Vec<f32>, Vec<f32>, Vec<u8>) {
    if cols == 0 || rows == 0 {
        return (vec![0.0; cols], vec![0.0; cols], Vec::new());
    }
    let (lo, hi) = data
        .par_chunks(cols)
        .fold(
            || (vec![f32::INFINITY; cols], vec![f32::NEG_INFINITY; cols]),
            |(mut lo, mut hi), row| {
                for (j, &v) in row.iter().enumerate() {
                    lo[j] = lo[j].min(v);
                    hi[j] = hi[j].max(v);
                }
                (lo, hi)
            },
        )
        .reduce(
            || (vec![f32::INFINITY; cols], vec![f32::NEG_INFINITY; cols]),
            |(mut a, mut b), (c, d)| {
                for j in 0..cols {
                    a[j] = a[j].min(c[j]);
                    b[j] = b[j].max(d[j]);
                }
                (a, b)
            },
        );
    let scale: Vec<f32> = lo.iter().zip(&hi).map(|(l, h)| (h - l) / 255.0).collect();
    let mut codes = vec![0u8; data.len()];
    codes
        .par_chunks_mut(cols)
        .zip(data.par_chunks(cols))
        .for_each(|(c, row)| {
            for j in 0..cols {
                if scale[j] > 0.0 {
                    c[j] = ((row[j] - lo[j]) / scale[j]).round().clamp(0.0, 255.0) as u8;
                }
            }
        });
    (scale, lo, codes)
}

/// `code * scale + min` per element, column `j = p mod cols`.
pub fn dequantize(codes: &[u8], scale: &[f32], min: &[f32]) -> Vec<f32> {
    let cols = scale.len();
    let mut out = vec![0f32; codes.len()];
    if cols == 0 {
        return out;
    }
    out.par_chunks_mut(cols)
        .zip(codes.par_chunks(cols))
        .for_each(|(o, c)| {
            for j in 0..cols {
                o[j] = c[j] as f32 * scale[j] + min[j];
            }
        });
    out
}
