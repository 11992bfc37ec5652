//! A table printed fixed-width on the terminal and written as Markdown beside the JSON, from
//! one list of columns, so the two never disagree.

/// Column alignment in the fixed-width text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Names.
    Left,
    /// Numbers.
    Right,
}

/// A table of preformatted cells.
#[derive(Debug, Clone, Default)]
pub struct Table {
    cols: Vec<(String, usize, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a column with its header and minimum text width.
    pub fn col(mut self, header: impl Into<String>, width: usize, align: Align) -> Self {
        self.cols.push((header.into(), width, align));
        self
    }

    /// Adds a left-aligned (name) column.
    pub fn left(self, header: impl Into<String>, width: usize) -> Self {
        self.col(header, width, Align::Left)
    }

    /// Adds a right-aligned (number) column.
    pub fn right(self, header: impl Into<String>, width: usize) -> Self {
        self.col(header, width, Align::Right)
    }

    /// Appends a row; missing cells print empty, extra ones are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn line(&self, cells: &[String]) -> String {
        let mut s = String::new();
        for (i, (_, w, a)) in self.cols.iter().enumerate() {
            let c = cells.get(i).map_or("", String::as_str);
            if i > 0 {
                s.push(' ');
            }
            match a {
                Align::Left => s += &format!("{c:<w$}"),
                Align::Right => s += &format!("{c:>w$}"),
            }
        }
        s.trim_end().to_string() + "\n"
    }

    /// Fixed-width text: header, then one line per row.
    pub fn text(&self) -> String {
        let head: Vec<String> = self.cols.iter().map(|c| c.0.clone()).collect();
        let mut s = self.line(&head);
        for r in &self.rows {
            s += &self.line(r);
        }
        s
    }

    /// A Markdown (GitHub) table.
    pub fn markdown(&self) -> String {
        let mut s = String::from("|");
        for c in &self.cols {
            s += &format!(" {} |", c.0);
        }
        s += "\n|";
        s += &"---|".repeat(self.cols.len());
        s += "\n";
        for r in &self.rows {
            s.push('|');
            for i in 0..self.cols.len() {
                s += &format!(" {} |", r.get(i).map_or("", String::as_str));
            }
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_markdown_agree() {
        let mut t = Table::new().left("model", 6).right("ms", 6);
        t.row(vec!["gcn".into(), "1.50".into()]);
        t.row(vec!["sage".into()]);
        assert_eq!(t.text(), "model      ms\ngcn      1.50\nsage\n");
        assert_eq!(
            t.markdown(),
            "| model | ms |\n|---|---|\n| gcn | 1.50 |\n| sage |  |\n"
        );
        assert_eq!(t.len(), 2);
    }
}
