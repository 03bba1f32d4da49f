//! Brent's root finder (R. P. Brent, "Algorithms for Minimization without Derivatives", 1973,
//! ch. 4, procedure `zero`), step for step as R's `uniroot` runs it (its C `R_zeroin2`): the
//! same bracketing, the same choice between inverse quadratic interpolation, the secant and
//! bisection, the same tolerance rule and iteration limit. The Mann-Whitney bounds and
//! estimate are where this search stops (R asks for `tol = 1e-4`), not exact roots, so only
//! the same steps give R's numbers.

/// Where the search stopped and whether it converged within the iteration limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Root {
    pub x: f64,
    pub converged: bool,
}

/// A root of `f` in `[a, b]`, given `fa = f(a)` and `fb = f(b)` of opposite signs (or one of
/// them zero), to within `tol`, in at most `max_iter` steps (R's `uniroot` default is 1000).
///
/// A non-finite value of `f` counts as the largest finite number of its sign (NaN as
/// positive), as R's `uniroot` does.
pub fn zeroin(
    mut f: impl FnMut(f64) -> f64,
    a: f64,
    b: f64,
    fa: f64,
    fb: f64,
    tol: f64,
    max_iter: u32,
) -> Root {
    if fa == 0.0 {
        return Root {
            x: a,
            converged: true,
        };
    }
    if fb == 0.0 {
        return Root {
            x: b,
            converged: true,
        };
    }
    let mut s = State {
        a,
        b,
        c: a,
        fa,
        fb,
        fc: fa,
    };
    for _ in 0..=max_iter {
        let prev_step = s.b - s.a;
        if s.fc.abs() < s.fb.abs() {
            s.make_b_best();
        }
        let tol_act = 2.0 * f64::EPSILON * s.b.abs() + tol / 2.0;
        let mut step = (s.c - s.b) / 2.0;
        if step.abs() <= tol_act || s.fb == 0.0 {
            return Root {
                x: s.b,
                converged: true,
            };
        }
        if prev_step.abs() >= tol_act && s.fa.abs() > s.fb.abs() {
            if let Some(interpolated) = s.interpolate(prev_step, tol_act) {
                step = interpolated;
            }
        }
        if step.abs() < tol_act {
            step = if step > 0.0 { tol_act } else { -tol_act };
        }
        s.a = s.b;
        s.fa = s.fb;
        s.b += step;
        s.fb = finite(f(s.b));
        if (s.fb > 0.0 && s.fc > 0.0) || (s.fb < 0.0 && s.fc < 0.0) {
            s.c = s.a;
            s.fc = s.fa;
        }
    }
    Root {
        x: s.b,
        converged: false,
    }
}

/// `b` is the best approximation so far, `a` the previous one, `c` the point that keeps the
/// root bracketed with `b` (f(b) and f(c) of opposite signs).
struct State {
    a: f64,
    b: f64,
    c: f64,
    fa: f64,
    fb: f64,
    fc: f64,
}

impl State {
    fn make_b_best(&mut self) {
        self.a = self.b;
        self.b = self.c;
        self.c = self.a;
        self.fa = self.fb;
        self.fb = self.fc;
        self.fc = self.fa;
    }

    /// The interpolation step (secant with two distinct points, inverse quadratic with three),
    /// when it falls inside `[b, c]` and is less than half the step before last.
    fn interpolate(&self, prev_step: f64, tol_act: f64) -> Option<f64> {
        let cb = self.c - self.b;
        let (mut p, mut q);
        if self.a == self.c {
            let t1 = self.fb / self.fa;
            p = cb * t1;
            q = 1.0 - t1;
        } else {
            let qa = self.fa / self.fc;
            let t1 = self.fb / self.fc;
            let t2 = self.fb / self.fa;
            p = t2 * (cb * qa * (qa - t1) - (self.b - self.a) * (t1 - 1.0));
            q = (qa - 1.0) * (t1 - 1.0) * (t2 - 1.0);
        }
        if p > 0.0 {
            q = -q;
        } else {
            p = -p;
        }
        let inside = p < (0.75 * cb * q - (tol_act * q).abs() / 2.0);
        let small = p < (prev_step * q / 2.0).abs();
        (inside && small).then(|| p / q)
    }
}

fn finite(v: f64) -> f64 {
    if v.is_nan() || v == f64::INFINITY {
        f64::MAX
    } else if v == f64::NEG_INFINITY {
        -f64::MAX
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_square_root_of_two_within_the_tolerance() {
        let f = |x: f64| x * x - 2.0;
        let root = zeroin(f, 0.0, 2.0, -2.0, 2.0, 1e-10, 1000);
        assert!(root.converged);
        assert!((root.x - 2f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn a_zero_at_an_end_is_the_root() {
        let root = zeroin(|x| x, 0.0, 1.0, 0.0, 1.0, 1e-4, 1000);
        assert_eq!(root.x, 0.0);
    }

    #[test]
    fn a_step_function_stops_at_the_jump() {
        let f = |x: f64| if x < 0.3 { 1.0 } else { -1.0 };
        let root = zeroin(f, 0.0, 1.0, 1.0, -1.0, 1e-4, 1000);
        assert!((root.x - 0.3).abs() < 1e-4);
    }
}
