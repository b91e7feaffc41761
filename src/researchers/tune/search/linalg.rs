//! The small linear algebra the models need: norms, a linear solve, a Cholesky solve and the
//! trust-region step.

pub(super) fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

pub(super) fn dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

pub(super) fn cap(v: &[f64], max: f64) -> Vec<f64> {
    let n = norm(v);
    if n > max {
        v.iter().map(|x| x * max / n).collect()
    } else {
        v.to_vec()
    }
}

/// Gaussian elimination with partial pivoting.
#[allow(clippy::needless_range_loop)] // matrix code reads best with indices
pub(super) fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let piv = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-14 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for r in col + 1..n {
            let f = a[r][col] / a[col][col];
            if f != 0.0 {
                for k in col..n {
                    a[r][k] -= f * a[col][k];
                }
                b[r] -= f * b[col];
            }
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|k| a[r][k] * x[k]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

#[allow(clippy::needless_range_loop)] // matrix code reads best with indices
pub(super) fn cholesky_solve(h: &[Vec<f64>], lambda: f64, rhs: &[f64]) -> Option<Vec<f64>> {
    let n = rhs.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = h[i][j] + if i == j { lambda } else { 0.0 };
            for k in 0..j {
                s -= l[i][k] * l[j][k];
            }
            if i == j {
                if s <= 1e-12 {
                    return None;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        let s: f64 = (0..i).map(|k| l[i][k] * y[k]).sum();
        y[i] = (rhs[i] - s) / l[i][i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k][i] * x[k]).sum();
        x[i] = (y[i] - s) / l[i][i];
    }
    Some(x)
}

/// Approximate minimiser of g·s + ½ sᵀHs over ‖s‖ ≤ delta (Levenberg-style search on λ).
pub(super) fn trust_region(g: &[f64], h: &[Vec<f64>], delta: f64) -> Option<Vec<f64>> {
    let gn = norm(g);
    let neg: Vec<f64> = g.iter().map(|x| -x).collect();
    let hmax = h
        .iter()
        .flat_map(|r| r.iter())
        .fold(0.0f64, |a, &b| a.max(b.abs()));
    if hmax == 0.0 {
        if gn == 0.0 {
            return None;
        }
        return Some(neg.iter().map(|x| x * delta / gn).collect());
    }
    if let Some(s) = cholesky_solve(h, 0.0, &neg) {
        if norm(&s) <= delta {
            return Some(s);
        }
    }
    let mut hi = hmax.max(gn / delta).max(1e-12);
    let mut tries = 0;
    loop {
        match cholesky_solve(h, hi, &neg) {
            Some(s) if norm(&s) <= delta => break,
            _ => hi *= 2.0,
        }
        tries += 1;
        if tries > 200 {
            return None;
        }
    }
    let mut lo = 0.0;
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        match cholesky_solve(h, mid, &neg) {
            Some(s) if norm(&s) <= delta => hi = mid,
            _ => lo = mid,
        }
    }
    let s = cholesky_solve(h, hi, &neg)?;
    if gn == 0.0 && norm(&s) < 1e-15 {
        return None;
    }
    Some(s)
}
