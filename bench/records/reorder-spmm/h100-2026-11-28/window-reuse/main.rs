use gnn_graph::reorder::window_distinct_ratio;
fn main() {
    let names: Vec<String> = std::env::args().skip(1).collect();
    for c in gnn_train::bench::graph_set::select(&names, &[]).unwrap() {
        let t = std::time::Instant::now();
        let (g, _) = c.build().unwrap();
        let r: Vec<String> = [16usize, 64, 256]
            .iter()
            .map(|&w| format!("{:.3}", window_distinct_ratio(&g, w, 4_000_000)))
            .collect();
        let full16 = window_distinct_ratio(&g, 16, usize::MAX);
        println!("{:24} n={} nnz={} ratio16/64/256 (4M sample) {} | full16 {:.3} | {:.1}s", c.name, g.n_rows(), g.nnz(), r.join("/"), full16, t.elapsed().as_secs_f64());
    }
}
