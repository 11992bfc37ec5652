//! Each refusal names its kind: a tensor of the wrong shape ([`Error::Shape`]), a dtype the
//! op does not take ([`Error::DType`]), a valid request this build or kernel does not do
//! ([`Error::Unsupported`]), a scalar out of its range ([`Error::InvalidArgument`]).

mod common;

use candle_core::{DType, Device, Tensor};
use gnn_kernels::{
    bias_relu_dropout, dropout, layer_norm, maxk, relu_dropout, spmm, DeviceGraph, Error, Reduce,
    Sampling,
};

fn ones(shape: &[usize], dt: DType) -> Tensor {
    Tensor::ones(shape, dt, &Device::Cpu).unwrap()
}

#[test]
fn shapes_and_dtypes_that_do_not_fit_are_shape_and_dtype_errors() {
    let x = ones(&[4, 3], DType::F32);
    let e = bias_relu_dropout(&x, &ones(&[4], DType::F32), 0.5, 0).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Shape {
                op: "bias_relu_dropout",
                ..
            }
        ),
        "{e:?}"
    );
    let e = bias_relu_dropout(&x, &ones(&[3], DType::F64), 0.5, 0).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DType {
                op: "bias_relu_dropout",
                ..
            }
        ),
        "{e:?}"
    );
    let g = DeviceGraph::upload(&common::graph(5, 6, 2, 0, 1), &Device::Cpu).unwrap();
    let e = spmm(&g, &ones(&[5, 3], DType::F32), Reduce::Sum).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "spmm", .. }), "{e:?}");
    let e = spmm(&g, &ones(&[6, 3], DType::U8), Reduce::Sum).unwrap_err();
    assert!(matches!(e, Error::DType { .. }), "{e:?}");
}

#[test]
fn out_of_range_scalars_are_invalid_arguments() {
    let x = ones(&[4, 3], DType::F32);
    for p in [1.0, -0.1, f32::NAN] {
        let e = dropout(&x, p, 0).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument { op: "dropout", .. }),
            "{e:?}"
        );
    }
    let e = relu_dropout(&x, 1.5, 0).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
    let (w, b) = (ones(&[3], DType::F32), ones(&[3], DType::F32));
    let e = layer_norm(&x, &w, &b, 0.0).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "layer_norm",
                ..
            }
        ),
        "{e:?}"
    );
    for k in [0, 4] {
        let e = maxk(&x, k).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument { op: "maxk", .. }),
            "k {k}: {e:?}"
        );
    }
    let e = Sampling::aes(0).validate().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
}

#[test]
fn valid_requests_beyond_this_build_are_unsupported() {
    // Half precision runs on CUDA only.
    let e = dropout(&ones(&[4, 3], DType::BF16), 0.5, 0).unwrap_err();
    assert!(
        matches!(e, Error::Unsupported { op: "dropout", .. }),
        "{e:?}"
    );
    // MaxK keeps a row in one warp's registers: at most 1024 wide.
    let e = maxk(&ones(&[2, 2000], DType::F32), 8).unwrap_err();
    assert!(matches!(e, Error::Unsupported { op: "maxk", .. }), "{e:?}");
    let e = Sampling::aes(gnn_kernels::ops::sampled::MAX_WIDTH + 1)
        .validate()
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    // Max has no transpose product for an aggregate-first layer.
    let g = DeviceGraph::upload(&common::graph(5, 6, 2, 0, 1), &Device::Cpu).unwrap();
    let h = ones(&[6, 3], DType::F32);
    let Err(e) = gnn_kernels::Aggregate::new(&g, &h, None, Reduce::Max) else {
        panic!("a max aggregate was accepted");
    };
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    // No library error gives command-line advice.
    for e in [e, maxk(&ones(&[2, 2000], DType::F32), 8).unwrap_err()] {
        assert!(!e.to_string().contains("--"), "{e}");
    }
}
