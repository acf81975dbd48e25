// rust_names: a Rust program whose allocations go through generic methods, closures and the
// standard library, so that its symbols carry both Rust manglings (legacy `_ZN...17h<hash>E` for
// its own code, v0 `_R...` with `-C symbol-mangling-version=v0` or in recent standard libraries).
// The test requires every function name in its trace demangled: no `$LT$` escapes, no `::h<hash>`
// suffix, no mangled names left.
use std::collections::HashMap;

struct Holder<T> {
    items: Vec<T>,
}

impl<T: Clone> Holder<T> {
    #[inline(never)]
    fn keep(&mut self, x: &T) {
        self.items.push(x.clone());
    }
}

#[inline(never)]
fn make_boxes(n: usize) -> Vec<Box<[u8; 100]>> {
    (0..n).map(|i| Box::new([i as u8; 100])).collect()
}

fn main() {
    let boxes = make_boxes(1000);
    let mut holder = Holder { items: Vec::new() };
    let mut counts: HashMap<String, usize> = HashMap::new();
    for (i, b) in boxes.iter().enumerate() {
        let name = format!("key-{}", i % 97);
        holder.keep(&name);
        *counts.entry(name).or_insert(0) += b[0] as usize;
    }
    println!("{} boxes, {} kept, {} keys", boxes.len(), holder.items.len(), counts.len());
}
