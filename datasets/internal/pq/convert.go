package pq

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"
)

// Foreign Parquet.
//
// pandas, DuckDB, Polars and Spark write the same columns with other
// physical and logical types than steplab: int64 counts, int32 or unsigned
// integers, float32, TIMESTAMP instants, strings through a dictionary or
// not. A conversion says how the values of one file column become the
// values of one field; planConversion picks it from the column's types and
// refuses what would change a value's meaning (a float into an integer, a
// TIMESTAMP into a duration), naming both sides.

// srcType is how a column's values are stored, as the reader sees them.
type srcType uint8

const (
	srcInt32  srcType = iota + 1 // INT32, signed (INT(8|16|32,true) or none)
	srcUint32                    // INT32 holding UINT(8|16|32)
	srcInt64                     // INT64, signed, or a TIMESTAMP
	srcUint64                    // INT64 holding UINT(64)
	srcInt96                     // INT96: a legacy (Impala, Spark) timestamp
	srcFloat
	srcDouble
	srcBool
	srcBytes // BYTE_ARRAY: STRING, ENUM, JSON or plain bytes
)

// conversion maps one file column onto one field.
type conversion struct {
	src srcType
	// scale is the nanoseconds per unit of a TIMESTAMP column (1e6 for
	// millis, 1e3 for micros, 1 for nanos), 0 otherwise.
	scale int64
	// unit is 10^scale of a DECIMAL column of a non-zero scale: its
	// integers are the values times unit.
	unit int64
	// decimal is the column's type, for messages ("DECIMAL(18,2)").
	decimal string
}

// describeType names a column's type as a Parquet reader prints it:
// the physical type, then the logical one ("INT64 TIMESTAMP(MICROS)").
func describeType(t parquet.Type) string {
	if t.Kind() < 0 {
		return "NULL (every value is null)"
	}
	s := t.Kind().String()
	if t.Kind() == parquet.FixedLenByteArray {
		s += fmt.Sprintf("(%d)", t.Length())
	}
	lt := t.LogicalType()
	if lt == nil || lt.Value == nil {
		return s
	}
	switch v := lt.Value.(type) {
	case *format.StringType:
		return s + " STRING"
	case *format.TimestampType:
		return s + " TIMESTAMP(" + unitName(&v.Unit) + ")"
	case *format.IntType:
		if v.IsSigned {
			return fmt.Sprintf("%s INT(%d)", s, v.BitWidth)
		}
		return fmt.Sprintf("%s UINT(%d)", s, v.BitWidth)
	}
	return s + " " + lt.String()
}

func unitName(u *format.TimeUnit) string {
	switch u.Value.(type) {
	case *format.MilliSeconds:
		return "MILLIS"
	case *format.MicroSeconds:
		return "MICROS"
	case *format.NanoSeconds:
		return "NANOS"
	}
	return u.String()
}

// expects says, for an error message, what a field reads.
func (f *codecField) expects() string {
	switch {
	case f.timestamp:
		return "int64 nanoseconds (an integer column, or a TIMESTAMP of any unit)"
	case f.kind == kindInt64:
		return "int64 (an integer column of any width)"
	case f.kind == kindInt32:
		return "int32 (an integer column of any width whose values fit)"
	case f.kind == kindFloat64:
		return "float64 (a floating-point or integer column)"
	case f.kind == kindBool:
		return "bool (a BOOLEAN column)"
	case f.kind == kindString:
		return "string (a string or integer column)"
	case f.kind == kindInt64List:
		return "list<int64> (a list of integers)"
	}
	return f.kind.String()
}

// planConversion picks how a leaf column of type t reads into field f.
// hint, when not empty, says what to change in the file.
func planConversion(f *codecField, t parquet.Type) (conv conversion, hint string, ok bool) {
	lt := t.LogicalType()
	var logical format.LogicalTypeValue
	if lt != nil {
		logical = lt.Value
	}
	if d, isDecimal := logical.(*format.DecimalType); isDecimal {
		return planDecimal(f, t, d)
	}
	switch t.Kind() {
	case parquet.Int32:
		switch v := logical.(type) {
		case nil:
			conv.src = srcInt32
		case *format.IntType:
			conv.src = srcInt32
			if !v.IsSigned {
				conv.src = srcUint32
			}
		default:
			return conv, "", false
		}
	case parquet.Int64:
		switch v := logical.(type) {
		case nil:
			conv.src = srcInt64
		case *format.IntType:
			conv.src = srcInt64
			if !v.IsSigned {
				conv.src = srcUint64
			}
		case *format.TimestampType:
			if !f.timestamp {
				return conv, "a TIMESTAMP reads only into the columns that hold instants; durations are integer nanoseconds", false
			}
			conv.src = srcInt64
			switch v.Unit.Value.(type) {
			case *format.MilliSeconds:
				conv.scale = 1e6
			case *format.MicroSeconds:
				conv.scale = 1e3
			case *format.NanoSeconds:
				conv.scale = 1
			default:
				return conv, "", false
			}
		default:
			return conv, "", false
		}
	case parquet.Int96:
		if !f.timestamp {
			return conv, "an INT96 timestamp reads only into the columns that hold instants", false
		}
		conv.src = srcInt96
	case parquet.Float:
		conv.src = srcFloat
	case parquet.Double:
		conv.src = srcDouble
	case parquet.Boolean:
		conv.src = srcBool
	case parquet.ByteArray:
		switch logical.(type) {
		case nil, *format.StringType, *format.EnumType, *format.JsonType:
			conv.src = srcBytes
		default:
			return conv, "", false
		}
	default:
		return conv, "", false
	}
	integer := conv.src == srcInt32 || conv.src == srcUint32 || conv.src == srcInt64 || conv.src == srcUint64
	switch f.kind {
	case kindInt64, kindInt64List:
		ok = integer || conv.src == srcInt96
	case kindInt32:
		ok = integer && conv.scale == 0
	case kindFloat64:
		ok = (integer && conv.scale == 0) || conv.src == srcFloat || conv.src == srcDouble
	case kindBool:
		ok = conv.src == srcBool
	case kindString:
		ok = conv.src == srcBytes || (integer && conv.scale == 0)
	}
	if !ok && (conv.src == srcFloat || conv.src == srcDouble) && (f.kind == kindInt64 || f.kind == kindInt32) {
		hint = "cast it to an integer type first (pandas: df[col].astype(\"Int64\"); DuckDB: CAST(col AS BIGINT))"
	}
	return conv, hint, ok
}

// planDecimal reads a DECIMAL stored as INT32 or INT64 (precision 18 or
// less: DuckDB writes SUM and integer arithmetic as DECIMAL(18,0)) at its
// scale: into a float field as the value, into an integer field where the
// value is a whole number (loadDecimal refuses one that is not). A DECIMAL
// in a byte array, or one into an instant, is refused with the cast that
// makes it readable.
func planDecimal(f *codecField, t parquet.Type, d *format.DecimalType) (conv conversion, hint string, ok bool) {
	conv.decimal = fmt.Sprintf("DECIMAL(%d,%d)", d.Precision, d.Scale)
	stored := t.Kind() == parquet.Int32 || t.Kind() == parquet.Int64
	if stored && !f.timestamp && f.kind != kindBool && d.Scale >= 0 && d.Scale <= 18 {
		conv.src = srcInt32
		if t.Kind() == parquet.Int64 {
			conv.src = srcInt64
		}
		if d.Scale > 0 {
			conv.unit = int64(math.Pow10(int(d.Scale)))
		}
		return conv, "", true
	}
	return conv, fmt.Sprintf("%s is read only from INT32 or INT64 (precision 18 or less), into numbers: %s", conv.decimal, decimalCast(f)), false
}

// decimalCast is the cast that makes a DECIMAL column readable as f.
func decimalCast(f *codecField) string {
	if f.kind == kindFloat64 {
		return "cast it first (DuckDB: CAST(col AS DOUBLE); pandas: df[col].astype(\"float64\"))"
	}
	return "cast it first (DuckDB: CAST(col AS BIGINT); pandas: df[col].astype(\"Int64\"))"
}

// loadDecimal turns a page of a DECIMAL column of a non-zero scale into
// its values: doubles for a float field, integers otherwise (a value with
// a fraction is refused, naming the column and the cast).
func (v *colValues) loadDecimal(f *codecField, cv conversion, data encoding.Values) (encoding.Values, conversion, error) {
	var raw []int64
	if cv.src == srcInt32 {
		raw = widen(v.sDec[:0], data.Int32())
	} else {
		raw = append(v.sDec[:0], data.Int64()...)
	}
	v.sDec = raw
	if f.kind == kindFloat64 {
		out := slices.Grow(v.sDecF[:0], len(raw))[:len(raw)]
		for i, x := range raw {
			out[i] = float64(x) / float64(cv.unit)
		}
		v.sDecF = out
		return encoding.DoubleValues(out), conversion{src: srcDouble}, nil
	}
	for i, x := range raw {
		if x%cv.unit != 0 {
			return data, cv, valueError{fmt.Errorf("column %q: %s value %s is not a whole number, and steplab reads the column as %s: %s",
				f.name, cv.decimal, strconv.FormatFloat(float64(x)/float64(cv.unit), 'f', -1, 64), f.kind, decimalCast(f))}
		}
		raw[i] = x / cv.unit
	}
	return encoding.Int64Values(raw), conversion{src: srcInt64}, nil
}

// colValues holds the values of one page (or one dictionary) converted to
// the field's Go type, and scratch storage reused from page to page. A
// column whose file type is the field's type is not copied: its slice
// aliases the page.
type colValues struct {
	i64   []int64
	i32   []int32
	f64   []float64
	bools []bool
	strs  []string

	sI64  []int64
	sI32  []int32
	sF64  []float64
	sBool []bool
	sStr  []string
	// scratch of loadDecimal
	sDec  []int64
	sDecF []float64
}

// own copies values that alias a page into v's scratch storage, so that
// they outlive the page (a dictionary, used by every page of its chunk).
func (v *colValues) own() {
	if len(v.i64) > 0 && &v.i64[0] != unsafe.SliceData(v.sI64) {
		v.i64 = append(v.sI64[:0], v.i64...)
		v.sI64 = v.i64
	}
	if len(v.i32) > 0 && &v.i32[0] != unsafe.SliceData(v.sI32) {
		v.i32 = append(v.sI32[:0], v.i32...)
		v.sI32 = v.i32
	}
	if len(v.f64) > 0 && &v.f64[0] != unsafe.SliceData(v.sF64) {
		v.f64 = append(v.sF64[:0], v.f64...)
		v.sF64 = v.f64
	}
}

func (v *colValues) len(k fieldKind) int {
	switch k {
	case kindInt64, kindInt64List:
		return len(v.i64)
	case kindInt32:
		return len(v.i32)
	case kindFloat64:
		return len(v.f64)
	case kindBool:
		return len(v.bools)
	case kindString:
		return len(v.strs)
	}
	return 0
}

// load converts data (n values for BOOLEAN pages, whose bits do not say how
// many they hold) into v.
func (v *colValues) load(f *codecField, cv conversion, data encoding.Values, n int) error {
	if cv.unit > 1 {
		var err error
		if data, cv, err = v.loadDecimal(f, cv, data); err != nil {
			return err
		}
	}
	switch f.kind {
	case kindInt64, kindInt64List:
		return v.loadInt64(f, cv, data)
	case kindInt32:
		return v.loadInt32(f, cv, data)
	case kindFloat64:
		v.loadFloat64(cv, data)
	case kindBool:
		bits := data.Boolean()
		if len(bits)*8 < n {
			return fmt.Errorf("column %q: %d bits for %d values", f.name, len(bits)*8, n)
		}
		v.bools = slices.Grow(v.sBool[:0], n)[:n]
		for i := range v.bools {
			v.bools[i] = bits[i>>3]>>(i&7)&1 != 0
		}
		v.sBool = v.bools
	case kindString:
		return v.loadString(f, cv, data)
	}
	return nil
}

func (v *colValues) loadInt64(f *codecField, cv conversion, data encoding.Values) error {
	switch cv.src {
	case srcInt64:
		src := data.Int64()
		if cv.scale <= 1 {
			v.i64 = src
			return nil
		}
		v.i64 = slices.Grow(v.sI64[:0], len(src))[:len(src)]
		lim := math.MaxInt64 / cv.scale
		for i, x := range src {
			if x > lim || x < -lim {
				return fmt.Errorf("column %q: timestamp %d × %d ns overflows int64 nanoseconds", f.name, x, cv.scale)
			}
			v.i64[i] = x * cv.scale
		}
	case srcUint64:
		src := data.Int64()
		for _, x := range src {
			if x < 0 {
				return fmt.Errorf("column %q: value %d does not fit %s", f.name, uint64(x), f.kind)
			}
		}
		v.i64 = src
		return nil
	case srcInt32:
		v.i64 = widen(v.sI64[:0], data.Int32())
	case srcUint32:
		src := data.Int32()
		v.i64 = slices.Grow(v.sI64[:0], len(src))[:len(src)]
		for i, x := range src {
			v.i64[i] = int64(uint32(x))
		}
	case srcInt96:
		src := data.Int96()
		v.i64 = slices.Grow(v.sI64[:0], len(src))[:len(src)]
		for i, x := range src {
			ns, ok := int96Nanos(x)
			if !ok {
				return fmt.Errorf("column %q: INT96 timestamp out of the int64 nanosecond range", f.name)
			}
			v.i64[i] = ns
		}
	}
	v.sI64 = v.i64
	return nil
}

// int96Nanos converts an INT96 timestamp (nanoseconds of the day, then the
// Julian day) to nanoseconds since the Unix epoch.
func int96Nanos(x deprecated.Int96) (int64, bool) {
	const unixEpochJulianDay = 2440588
	const nsPerDay int64 = 86400 * 1e9
	day := int64(x[2]) - unixEpochJulianDay
	nanos := int64(uint64(x[1])<<32 | uint64(x[0]))
	if nanos < 0 || nanos > nsPerDay || day > math.MaxInt64/nsPerDay-1 || day < math.MinInt64/nsPerDay+1 {
		return 0, false
	}
	return day*nsPerDay + nanos, true
}

func (v *colValues) loadInt32(f *codecField, cv conversion, data encoding.Values) error {
	switch cv.src {
	case srcInt32:
		v.i32 = data.Int32()
		return nil
	case srcUint32:
		src := data.Int32()
		for _, x := range src {
			if x < 0 {
				return fmt.Errorf("column %q: value %d does not fit int32", f.name, uint32(x))
			}
		}
		v.i32 = src
		return nil
	case srcInt64, srcUint64:
		src := data.Int64()
		v.i32 = slices.Grow(v.sI32[:0], len(src))[:len(src)]
		for i, x := range src {
			if x < math.MinInt32 || x > math.MaxInt32 || (cv.src == srcUint64 && x < 0) {
				if cv.src == srcUint64 {
					return fmt.Errorf("column %q: value %d does not fit int32", f.name, uint64(x))
				}
				return fmt.Errorf("column %q: value %d does not fit int32", f.name, x)
			}
			v.i32[i] = int32(x)
		}
	}
	v.sI32 = v.i32
	return nil
}

func (v *colValues) loadFloat64(cv conversion, data encoding.Values) {
	if cv.src == srcDouble {
		v.f64 = data.Double()
		return
	}
	v.f64 = v.sF64[:0]
	switch cv.src {
	case srcFloat:
		for _, x := range data.Float() {
			v.f64 = append(v.f64, float64(x))
		}
	case srcInt32:
		for _, x := range data.Int32() {
			v.f64 = append(v.f64, float64(x))
		}
	case srcUint32:
		for _, x := range data.Int32() {
			v.f64 = append(v.f64, float64(uint32(x)))
		}
	case srcInt64:
		for _, x := range data.Int64() {
			v.f64 = append(v.f64, float64(x))
		}
	case srcUint64:
		for _, x := range data.Int64() {
			v.f64 = append(v.f64, float64(uint64(x)))
		}
	}
	v.sF64 = v.f64
}

func (v *colValues) loadString(f *codecField, cv conversion, data encoding.Values) error {
	if cv.src != srcBytes {
		// Integer identifiers (a req_id of 17) read as their decimal text.
		var b []byte
		var offs []uint32
		appendInt := func(x int64) {
			offs = append(offs, uint32(len(b)))
			b = strconv.AppendInt(b, x, 10)
		}
		switch cv.src {
		case srcInt32:
			for _, x := range data.Int32() {
				appendInt(int64(x))
			}
		case srcUint32:
			for _, x := range data.Int32() {
				appendInt(int64(uint32(x)))
			}
		case srcInt64:
			for _, x := range data.Int64() {
				appendInt(x)
			}
		case srcUint64:
			for _, x := range data.Int64() {
				offs = append(offs, uint32(len(b)))
				b = strconv.AppendUint(b, uint64(x), 10)
			}
		}
		return v.setStrings(f, b, append(offs, uint32(len(b))))
	}
	b, offs := data.ByteArray()
	return v.setStrings(f, b, offs)
}

// setStrings slices the values of one page out of one string: one
// allocation per page.
func (v *colValues) setStrings(f *codecField, b []byte, offs []uint32) error {
	if len(offs) == 0 {
		v.strs = v.sStr[:0]
		return nil
	}
	all := string(b)
	v.strs = slices.Grow(v.sStr[:0], len(offs)-1)[:len(offs)-1]
	for i := range v.strs {
		lo, hi := offs[i], offs[i+1]
		if lo > hi || int(hi) > len(all) {
			return fmt.Errorf("column %q: bad string offsets", f.name)
		}
		v.strs[i] = all[lo:hi]
	}
	v.sStr = v.strs
	return nil
}

func widen(dst []int64, src []int32) []int64 {
	dst = slices.Grow(dst[:0], len(src))[:len(src)]
	for i, v := range src {
		dst[i] = int64(v)
	}
	return dst
}
