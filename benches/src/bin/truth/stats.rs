//! Agreement between two distributions over the same objects: top-1
//! agreement, Spearman's rank correlation (average ranks for ties) and the
//! total variation distance. Each takes the two weight vectors, index by
//! index (object i has truth weight `a[i]` and profiler weight `b[i]`);
//! the weights need not be normalised.

/// Index of the largest weight (the first of equal ones); `None` when all
/// weights are zero or there are none.
pub fn top(w: &[f64]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &x) in w.iter().enumerate() {
        let better = match best {
            None => x > 0.0,
            Some(b) => x > w[b],
        };
        if better {
            best = Some(i);
        }
    }
    best
}

/// Ranks 1..=n, ties sharing their average rank.
fn ranks(w: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..w.len()).collect();
    order.sort_by(|&i, &j| w[i].total_cmp(&w[j]));
    let mut r = vec![0.0; w.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && w[order[end]] == w[order[start]] {
            end += 1;
        }
        // Positions start..end (0-based) hold equal values: ranks start+1..=end.
        let avg = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            r[i] = avg;
        }
        start = end;
    }
    r
}

fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// Spearman's rho: Pearson's correlation of the ranks. `None` with fewer
/// than 3 objects or when one side ranks all objects equal (undefined).
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 3 {
        return None;
    }
    pearson(&ranks(a), &ranks(b))
}

/// Total variation distance between the two distributions after
/// normalising each to sum 1: half the L1 distance, 0 (same) to 1
/// (disjoint). `None` when a side has no weight.
pub fn tvd(a: &[f64], b: &[f64]) -> Option<f64> {
    let (sa, sb) = (a.iter().sum::<f64>(), b.iter().sum::<f64>());
    if sa <= 0.0 || sb <= 0.0 {
        return None;
    }
    Some(
        0.5 * a
            .iter()
            .zip(b)
            .map(|(x, y)| (x / sa - y / sb).abs())
            .sum::<f64>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_ignores_zeros_and_takes_the_first_maximum() {
        assert_eq!(top(&[0.0, 0.0]), None);
        assert_eq!(top(&[1.0, 3.0, 3.0]), Some(1));
    }

    #[test]
    fn ties_share_the_average_rank() {
        assert_eq!(ranks(&[10.0, 0.0, 0.0, 5.0]), vec![4.0, 1.5, 1.5, 3.0]);
    }

    #[test]
    fn spearman_of_monotone_and_reversed_orders() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert!((spearman(&a, &[10.0, 20.0, 30.0, 400.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((spearman(&a, &[4.0, 3.0, 2.0, 1.0]).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(spearman(&a, &[1.0, 1.0, 1.0, 1.0]), None);
        assert_eq!(spearman(&a[..2], &a[..2]), None);
    }

    #[test]
    fn tvd_is_half_the_l1_distance_of_the_normalised_shares() {
        assert_eq!(tvd(&[1.0, 1.0], &[2.0, 2.0]), Some(0.0));
        assert_eq!(tvd(&[1.0, 0.0], &[0.0, 5.0]), Some(1.0));
        assert!((tvd(&[3.0, 1.0], &[1.0, 1.0]).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(tvd(&[0.0], &[1.0]), None);
    }
}
