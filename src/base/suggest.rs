//! "Did you mean …?" for misspelt names (params, options, globals, targets).

/// Edit distance where swapping two neighbouring letters counts as one edit
/// (optimal string alignment): `cuont` is one typo away from `count`.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// The closest candidate, if it is close enough to be a plausible typo.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let word = word.to_lowercase();
    candidates
        .into_iter()
        .filter_map(|c| {
            let lc = c.to_lowercase();
            let d = distance(&word, &lc);
            let longest = c.chars().count().max(word.chars().count());
            // Names that start alike (`retry` for `retries`) may differ more at the end.
            let shared = word
                .chars()
                .zip(lc.chars())
                .take_while(|(a, b)| a == b)
                .count();
            let limit = if shared >= 3 {
                longest / 2
            } else {
                (longest / 3).max(1)
            };
            (d <= limit).then_some((d, c))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `; did you mean 'x'?` or nothing.
pub fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, candidates)
        .map(|c| format!("; did you mean '{c}'?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_typos_only() {
        assert_eq!(closest("cuont", ["count", "dir", "token"]), Some("count"));
        assert_eq!(closest("retry", ["retries", "delay"]), Some("retries"));
        assert_eq!(closest("zzz", ["count", "dir"]), None);
    }
}
