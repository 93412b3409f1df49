package pq

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

type fieldKind uint8

const (
	kindInt32 fieldKind = iota + 1
	kindInt64
	kindFloat64
	kindBool
	kindString
	kindInt64List
)

func (k fieldKind) String() string {
	switch k {
	case kindInt32:
		return "int32"
	case kindInt64:
		return "int64"
	case kindFloat64:
		return "float64"
	case kindBool:
		return "bool"
	case kindString:
		return "string"
	case kindInt64List:
		return "list<int64>"
	}
	return "?"
}

// codecField is one struct field mapped to one top-level column.
type codecField struct {
	name   string
	kind   fieldKind
	offset uintptr

	delta, dict, split bool // encodings asked by the parquet tag
	timestamp          bool // an instant: TIMESTAMP columns read into it (the timestamp tag)

	hasDefault bool
	defText    string
	defInt     int64
	defFloat   float64
	defBool    bool
	defString  string
}

// Codec describes a flat struct (int32, int64, float64, bool, string and
// []int64 list fields) that the columnar fast paths read and write through
// field offsets, with no per-value reflection. Other structs go through
// parquet-go's generic reader and writer.
type Codec struct {
	typ     reflect.Type
	size    uintptr
	fields  []codecField
	hasList bool
}

var codecCache sync.Map // reflect.Type -> codecResult

type codecResult struct {
	c   *Codec
	err error
}

// CodecFor returns the columnar codec of t, or an error saying why t needs
// the generic path.
func CodecFor(t reflect.Type) (*Codec, error) {
	if v, ok := codecCache.Load(t); ok {
		r := v.(codecResult)
		return r.c, r.err
	}
	c, err := buildCodec(t)
	codecCache.Store(t, codecResult{c, err})
	return c, err
}

func buildCodec(t reflect.Type) (*Codec, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s is not a struct", t)
	}
	c := &Codec{typ: t, size: t.Size()}
	if err := c.addFields(t, 0, map[string]bool{}); err != nil {
		return nil, err
	}
	if len(c.fields) == 0 {
		return nil, fmt.Errorf("%s has no columns", t)
	}
	return c, nil
}

// addFields adds the fields of struct t, found at offset base of the row;
// an embedded struct without a parquet tag contributes its own fields, as
// in parquet-go.
func (c *Codec) addFields(t reflect.Type, base uintptr, seen map[string]bool) error {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, hasTag := sf.Tag.Lookup("parquet")
		if sf.Anonymous && !hasTag && sf.Type.Kind() == reflect.Struct {
			if err := c.addFields(sf.Type, base+sf.Offset, seen); err != nil {
				return err
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		parts := strings.Split(tag, ",")
		name := parts[0]
		if name == "-" {
			continue
		}
		if !hasTag || name == "" {
			name = sf.Name
		}
		f := codecField{name: name, offset: base + sf.Offset}
		if err := f.parseTags(sf, parts[1:]); err != nil {
			return err
		}
		if f.kind == kindInt64List {
			c.hasList = true
		}
		if seen[name] {
			return fmt.Errorf("column %s twice", name)
		}
		seen[name] = true
		c.fields = append(c.fields, f)
	}
	return nil
}

// parseTags sets the kind, encodings, default and timestamp flag of f from
// the struct field and its parquet tag options.
func (f *codecField) parseTags(sf reflect.StructField, opts []string) error {
	list := false
	for _, opt := range opts {
		switch opt {
		case "delta":
			f.delta = true
		case "dict":
			f.dict = true
		case "split":
			f.split = true
		case "plain", "zstd", "":
		case "list":
			list = true
		default:
			return fmt.Errorf("field %s: tag option %q", sf.Name, opt)
		}
	}
	switch sf.Type {
	case reflect.TypeFor[int32]():
		f.kind = kindInt32
	case reflect.TypeFor[int64]():
		f.kind = kindInt64
	case reflect.TypeFor[float64]():
		f.kind = kindFloat64
	case reflect.TypeFor[bool]():
		f.kind = kindBool
	case reflect.TypeFor[string]():
		f.kind = kindString
	case reflect.TypeFor[[]int64]():
		if !list {
			return fmt.Errorf("field %s: []int64 without the list tag", sf.Name)
		}
		f.kind = kindInt64List
	default:
		return fmt.Errorf("field %s: type %s", sf.Name, sf.Type)
	}
	if list && f.kind != kindInt64List {
		return fmt.Errorf("field %s: list tag on %s", sf.Name, sf.Type)
	}
	if (f.delta && f.kind != kindInt32 && f.kind != kindInt64) || (f.split && f.kind != kindFloat64) || (f.dict && f.kind != kindString) {
		return fmt.Errorf("field %s: encoding not supported by the columnar path", sf.Name)
	}
	if ts, ok := sf.Tag.Lookup("timestamp"); ok {
		if ts != "ns" || f.kind != kindInt64 {
			return fmt.Errorf("field %s: the timestamp tag is \"ns\" on an int64 field", sf.Name)
		}
		f.timestamp = true
	}
	if d, ok := sf.Tag.Lookup("default"); ok {
		if err := f.setDefault(d); err != nil {
			return fmt.Errorf("field %s: %w", sf.Name, err)
		}
	}
	return nil
}

func (f *codecField) setDefault(d string) error {
	f.hasDefault, f.defText = true, d
	var err error
	switch f.kind {
	case kindInt32:
		f.defInt, err = strconv.ParseInt(d, 10, 32)
	case kindInt64:
		f.defInt, err = strconv.ParseInt(d, 10, 64)
	case kindFloat64:
		f.defFloat, err = strconv.ParseFloat(d, 64)
	case kindBool:
		f.defBool, err = strconv.ParseBool(d)
	case kindString:
		f.defString = d
	case kindInt64List:
		if d != "" {
			err = errors.New("a list default must be empty")
		}
	}
	if err != nil {
		return fmt.Errorf("bad default %q: %w", d, err)
	}
	return nil
}

// fillDefault sets field f of n rows starting at base to its default (or
// zero value).
func (f *codecField) fillDefault(base unsafe.Pointer, stride uintptr, n int) {
	p := unsafe.Add(base, f.offset)
	switch f.kind {
	case kindInt32:
		for i := 0; i < n; i++ {
			*(*int32)(unsafe.Add(p, uintptr(i)*stride)) = int32(f.defInt)
		}
	case kindInt64:
		for i := 0; i < n; i++ {
			*(*int64)(unsafe.Add(p, uintptr(i)*stride)) = f.defInt
		}
	case kindFloat64:
		for i := 0; i < n; i++ {
			*(*float64)(unsafe.Add(p, uintptr(i)*stride)) = f.defFloat
		}
	case kindBool:
		for i := 0; i < n; i++ {
			*(*bool)(unsafe.Add(p, uintptr(i)*stride)) = f.defBool
		}
	case kindString:
		for i := 0; i < n; i++ {
			*(*string)(unsafe.Add(p, uintptr(i)*stride)) = f.defString
		}
	case kindInt64List:
		for i := 0; i < n; i++ {
			*(*[]int64)(unsafe.Add(p, uintptr(i)*stride)) = nil
		}
	}
}

// Instants calls f on every known instant (a field with the timestamp tag,
// not negative: Unknown) of rows; rows of a type the codec does not handle
// have none.
func Instants[T any](rows []T, f func(*int64)) {
	c, err := CodecFor(reflect.TypeFor[T]())
	if err != nil || len(rows) == 0 {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(rows))
	for i := range c.fields {
		if !c.fields[i].timestamp {
			continue
		}
		for r := range rows {
			if p := (*int64)(unsafe.Add(base, uintptr(r)*c.size+c.fields[i].offset)); *p >= 0 {
				f(p)
			}
		}
	}
}

// Column is one column of a codec's struct: its name and the default a
// reader fills in where a file lacks it.
type Column struct {
	Name       string
	HasDefault bool
	Default    string // as the default tag writes it
}

// Columns lists the codec's columns in field order.
func (c *Codec) Columns() []Column {
	out := make([]Column, len(c.fields))
	for i, f := range c.fields {
		out[i] = Column{Name: f.name, HasDefault: f.hasDefault, Default: f.defText}
	}
	return out
}

// HasLists reports whether the struct has list fields, whose slices a
// writer gathers as it is given them.
func (c *Codec) HasLists() bool { return c.hasList }

// OwnLists copies the list fields of rows (T is the struct c describes)
// into arena and points them there, so that the rows no longer share
// their lists' memory with whoever filled them (a writer keeps the rows
// after the call that gave them). It returns the grown arena; lists
// copied before stay where they are if it grows.
func OwnLists[T any](c *Codec, rows []T, arena []int64) []int64 {
	for _, f := range c.fields {
		if f.kind != kindInt64List {
			continue
		}
		for i := range rows {
			l := (*[]int64)(unsafe.Add(unsafe.Pointer(&rows[i]), f.offset))
			if len(*l) == 0 {
				continue
			}
			n := len(arena)
			arena = append(arena, *l...)
			*l = arena[n:len(arena):len(arena)]
		}
	}
	return arena
}

var defaultsCache sync.Map // defaultsKey -> *Codec

type defaultsKey struct{ c, from *Codec }

// WithDefaults returns c with the default from declares for a column of
// the same name given to each field of c that declares none (a projection
// of from's struct), when the default converts to the field's type.
func (c *Codec) WithDefaults(from *Codec) *Codec {
	key := defaultsKey{c, from}
	if v, ok := defaultsCache.Load(key); ok {
		return v.(*Codec)
	}
	out := c
	for i := range c.fields {
		f := &c.fields[i]
		if f.hasDefault {
			continue
		}
		for _, sf := range from.fields {
			if sf.name != f.name || !sf.hasDefault {
				continue
			}
			nf := *f
			if nf.setDefault(sf.defText) != nil {
				break
			}
			if out == c {
				cp := *c
				cp.fields = slices.Clone(c.fields)
				out = &cp
			}
			out.fields[i] = nf
		}
	}
	defaultsCache.Store(key, out)
	return out
}
