// SPDX-License-Identifier: GPL-2.0 OR MIT

//! An RGB pixel canvas with rectangles, lines and bitmap text.

use crate::font;

/// An RGB colour.
pub type Rgb = [u8; 3];

/// White.
pub const WHITE: Rgb = [255, 255, 255];
/// Black.
pub const BLACK: Rgb = [0, 0, 0];
/// Grid lines.
pub const GRID: Rgb = [225, 225, 225];
/// Axis text.
pub const DARK: Rgb = [60, 60, 60];

/// An image being drawn; coordinates outside it are clipped.
#[derive(Clone, Debug)]
pub struct Canvas {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Row-major RGB bytes.
    pub pixels: Vec<u8>,
}

impl Canvas {
    /// A white canvas.
    pub fn new(width: usize, height: usize) -> Self {
        Canvas {
            width,
            height,
            pixels: vec![255; width * height * 3],
        }
    }

    /// Sets one pixel (clipped).
    pub fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            let i = (y as usize * self.width + x as usize) * 3;
            self.pixels[i..i + 3].copy_from_slice(&c);
        }
    }

    /// Reads one pixel.
    pub fn get(&self, x: usize, y: usize) -> Rgb {
        let i = (y * self.width + x) * 3;
        [self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]]
    }

    /// Fills the rectangle `[x0, x1) x [y0, y1)`.
    pub fn fill(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: Rgb) {
        for y in y0.min(y1)..y0.max(y1) {
            for x in x0.min(x1)..x0.max(x1) {
                self.set(x, y, c);
            }
        }
    }

    /// Outlines the rectangle `[x0, x1) x [y0, y1)`.
    pub fn outline(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: Rgb) {
        self.fill(x0, y0, x1, y0 + 1, c);
        self.fill(x0, y1 - 1, x1, y1, c);
        self.fill(x0, y0, x0 + 1, y1, c);
        self.fill(x1 - 1, y0, x1, y1, c);
    }

    /// A line `thickness` pixels wide (Bresenham, with square pens).
    pub fn line(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, thickness: i64, c: Rgb) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        let half = thickness / 2;
        loop {
            self.fill(
                x - half,
                y - half,
                x - half + thickness,
                y - half + thickness,
                c,
            );
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Draws `text` with its top-left corner at (x, y).
    pub fn text(&mut self, x: i64, y: i64, text: &str, scale: usize, c: Rgb) {
        let s = scale as i64;
        for (n, ch) in text.chars().enumerate() {
            let gx = x + (n * font::ADVANCE) as i64 * s;
            for (row, bits) in font::glyph(ch).iter().enumerate() {
                for col in 0..font::WIDTH {
                    if bits & (1 << (font::WIDTH - 1 - col)) != 0 {
                        let px = gx + col as i64 * s;
                        let py = y + row as i64 * s;
                        self.fill(px, py, px + s, py + s, c);
                    }
                }
            }
        }
    }

    /// Draws `text` centred horizontally on `cx`, top at `y`.
    pub fn text_centered(&mut self, cx: i64, y: i64, text: &str, scale: usize, c: Rgb) {
        let w = font::text_width(text, scale) as i64;
        self.text(cx - w / 2, y, text, scale, c);
    }

    /// Draws `text` right-aligned to `right`, top at `y`.
    pub fn text_right(&mut self, right: i64, y: i64, text: &str, scale: usize, c: Rgb) {
        let w = font::text_width(text, scale) as i64;
        self.text(right - w, y, text, scale, c);
    }

    /// Draws `text` rotated a quarter turn anticlockwise (reading bottom to top),
    /// centred vertically on `cy`, its left edge (the glyphs' top) at `x`.
    pub fn text_vertical(&mut self, x: i64, cy: i64, text: &str, scale: usize, c: Rgb) {
        let s = scale as i64;
        let bottom = cy + font::text_width(text, scale) as i64 / 2;
        for (n, ch) in text.chars().enumerate() {
            let base = bottom - (n * font::ADVANCE) as i64 * s;
            for (row, bits) in font::glyph(ch).iter().enumerate() {
                for col in 0..font::WIDTH {
                    if bits & (1 << (font::WIDTH - 1 - col)) != 0 {
                        let px = x + row as i64 * s;
                        let py = base - (col as i64 + 1) * s;
                        self.fill(px, py, px + s, py + s, c);
                    }
                }
            }
        }
    }

    /// Encodes the canvas as PNG.
    pub fn to_png(&self) -> Vec<u8> {
        crate::png::encode_rgb(self.width as u32, self.height as u32, &self.pixels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_clipped_shapes_and_text() {
        let mut c = Canvas::new(20, 10);
        c.fill(-5, -5, 2, 2, BLACK);
        assert_eq!(c.get(0, 0), BLACK);
        assert_eq!(c.get(1, 1), BLACK);
        assert_eq!(c.get(2, 2), WHITE);
        c.line(0, 9, 19, 9, 1, [1, 2, 3]);
        assert_eq!(c.get(10, 9), [1, 2, 3]);
        let mut t = Canvas::new(12, 8);
        t.text(0, 0, "1", 1, BLACK);
        // '1': row 0 is ..#.., row 6 is .###.
        assert_eq!(t.get(2, 0), BLACK);
        assert_eq!(t.get(1, 0), WHITE);
        assert_eq!((1..4).map(|x| t.get(x, 6)).collect::<Vec<_>>(), [BLACK; 3]);
        let mut v = Canvas::new(8, 12);
        v.text_vertical(0, 6, "L", 1, BLACK);
        // 'L' rotated: its bottom row (#####) becomes the rightmost column x=6.
        let column: Vec<Rgb> = (0..12).map(|y| v.get(6, y)).collect();
        assert_eq!(column.iter().filter(|p| **p == BLACK).count(), 5);
    }
}
