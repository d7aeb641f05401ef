package bench

import (
	"strings"
	"unicode/utf8"
)

// reportWidth is the width the text report keeps to, in columns.
const reportWidth = 80

// table lays out rows in columns (text/tabwriter cannot: a row's detail
// lines, which span the table, would break its columns).
type table struct {
	right []bool // right-aligned columns
	rows  []tableRow
}

type tableRow struct {
	cells  []string
	detail string // wrapped under the row, indented
	blank  bool   // an empty line
}

func (t *table) add(cells ...string) *tableRow {
	t.rows = append(t.rows, tableRow{cells: cells})
	return &t.rows[len(t.rows)-1]
}

func (t *table) gap() { t.rows = append(t.rows, tableRow{blank: true}) }

// write renders t into b, details indented by indent and wrapped at
// reportWidth.
func (t *table) write(b *strings.Builder, indent int) { t.writeWidth(b, indent, reportWidth) }

// writeWidth renders t into b, details indented by indent and wrapped at
// width.
func (t *table) writeWidth(b *strings.Builder, indent, width int) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r.cells {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range t.rows {
		if r.blank {
			b.WriteString("\n")
			continue
		}
		var line strings.Builder
		for i, c := range r.cells {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				line.WriteString("  ")
			}
			if i < len(t.right) && t.right[i] {
				line.WriteString(pad + c)
			} else if i < len(r.cells)-1 {
				line.WriteString(c + pad)
			} else {
				line.WriteString(c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
		if r.detail != "" {
			b.WriteString(wrap(r.detail, indent, width))
		}
	}
}

// wrap breaks text into lines of at most width columns (a word longer than
// that stays whole), each indented by indent spaces, each ending in "\n".
func wrap(text string, indent, width int) string {
	return wrapHang(text, indent, indent, width)
}

// wrapHang is wrap with a different indent for the first line.
func wrapHang(text string, first, rest, width int) string {
	return wrapPrefix(strings.Repeat(" ", first), text, rest, width)
}

// wrapPrefix is wrap with prefix (kept as it is) opening the first line,
// and later lines indented by rest spaces.
func wrapPrefix(prefix, text string, rest, width int) string {
	var b strings.Builder
	line := prefix
	n := utf8.RuneCountInString(prefix)
	empty := true
	for _, w := range strings.Fields(text) {
		wl := utf8.RuneCountInString(w)
		if !empty && n+1+wl > width {
			b.WriteString(line + "\n")
			line, n, empty = strings.Repeat(" ", rest), rest, true
		}
		if !empty {
			line += " "
			n++
		}
		line += w
		n += wl
		empty = false
	}
	b.WriteString(line + "\n")
	return b.String()
}
